"""Every option the scripts parse either acts or stops the run: the audit, as a test.

The scripts parse every field of TRL's configs (GRPOConfig / PPOConfig include transformers' TrainingArguments) and
of ModelConfig. A field that the parser accepts but nothing reads is a silent bug for the user who sets it, so each
script keeps the fields it cannot honour in UNSUPPORTED_OPTIONS, with the reason, and refuses them when set. Every
other field was checked to take effect (trl 1.12.0, transformers 5.23; the audit read the trainers' code paths and
ran the doubtful ones). The lists below are that audit: a TRL or transformers upgrade that adds, removes or renames
a field fails test_every_option_is_audited until the new field is sorted into one list or the other.
"""

import pytest

from conftest import script_parser
import grpo_trl_example as grpo
import ppo_trl_example as ppo

ACTS = {
    "grpo": set("""
        accelerator_config activation_checkpointing activation_checkpointing_kwargs adam_beta1 adam_beta2
        adam_epsilon attn_implementation auto_find_batch_size beta bf16 bnb_4bit_quant_storage
        bnb_4bit_quant_type cache_implementation cast_lm_head_to_fp32 chat_template_kwargs
        dataloader_drop_last dataloader_in_order dataloader_multiprocessing_context dataloader_num_workers
        dataloader_persistent_workers dataloader_pin_memory dataloader_prefetch_factor dataset_answer_column
        dataset_config dataset_name dataset_prompt_column dataset_test_split dataset_train_split ddp_backend
        ddp_broadcast_buffers ddp_bucket_cap_mb ddp_find_unused_parameters ddp_static_graph ddp_timeout
        debug deepspeed delta disable_dropout disable_tqdm do_eval ds3_gather_for_generation dtype
        enable_jit_checkpoint entropy_coef entropy_coef_delta entropy_coef_max entropy_coef_min
        entropy_target environment_factory epsilon epsilon_high eval_delay eval_max_prompts eval_num_samples
        eval_only eval_on_start
        eval_steps eval_strategy fp16 fsdp fsdp_config full_determinism generation_batch_size
        generation_kwargs gradient_accumulation_steps gradient_checkpointing gradient_checkpointing_kwargs
        greater_is_better hub_always_push hub_model_id hub_private_repo hub_revision hub_strategy hub_token
        ignore_data_skip importance_sampling_level include_num_input_tokens_seen learning_rate
        liger_kernel_config load_best_model_at_end load_in_4bit load_in_8bit local_rank log_completions
        log_completions_hub_repo log_level log_level_replica log_on_each_node log_unique_prompts
        logging_first_step logging_nan_inf_filter logging_steps logging_strategy lora_alpha lora_dropout
        lora_modules_to_save lora_r lora_target_modules lora_target_parameters lora_task_type loss_type
        lr_scheduler_kwargs lr_scheduler_type mask_truncated_completions max_completion_length max_grad_norm
        max_steps max_tool_calling_iterations metric_for_best_model min_p model_name_or_path model_revision
        multi_objective_aggregation
        neftune_noise_alpha no_signal_patience num_completions_to_print num_generations num_generations_eval
        num_iterations num_train_epochs off_policy_mask_threshold optim optim_args optim_target_modules
        output_dir pad_to_multiple_of parallelism_config per_device_eval_batch_size
        per_device_train_batch_size project push_to_hub ref_model_mixup_alpha ref_model_sync_steps
        reference_mode repetition_penalty report_to restore_callback_states_from_checkpoint
        resume_from_checkpoint reward_funcs reward_model_name_or_path reward_options reward_weights router_aux_loss_coef
        run_name sapo_temperature_neg sapo_temperature_pos save_on_each_node save_only_model save_steps
        save_strategy save_total_limit scale_rewards seed shuffle_dataset skip_memory_metrics
        steps_per_generation stop_on_no_signal system_prompt temperature tf32 tools top_entropy_quantile top_k
        top_p torch_compile torch_compile_backend torch_compile_mode torch_empty_cache_steps
        trackio_bucket_id trackio_space_id trackio_static_space_id transformers_continuous_batching_config
        trust_remote_code use_adaptive_entropy use_bias_correction_kl use_bnb_nested_quant use_cpu use_dora
        use_liger_kernel use_peft use_rslora use_transformers_continuous_batching use_transformers_paged
        use_vllm vespo_k_neg vespo_k_pos vespo_lambda_neg vespo_lambda_pos vllm_enable_sleep_mode
        vllm_gpu_memory_utilization vllm_group_port vllm_importance_sampling_cap
        vllm_importance_sampling_clip_max vllm_importance_sampling_clip_min
        vllm_importance_sampling_correction vllm_importance_sampling_mode vllm_max_model_length vllm_mode
        vllm_model_impl vllm_server_base_url vllm_server_host vllm_server_port vllm_server_timeout
        vllm_structured_outputs_regex vllm_tensor_parallel_size warmup_steps weight_decay
    """.split()),
    "ppo": set("""
        activation_checkpointing activation_checkpointing_kwargs adam_beta1 adam_beta2 adam_epsilon
        attn_implementation cliprange cliprange_value dataset_answer_column dataset_config dataset_name
        dataset_num_proc dataset_prompt_column dataset_test_split dataset_train_split ddp_backend
        ddp_timeout disable_tqdm dtype eval_max_prompts eval_num_samples eval_only
        gamma gradient_accumulation_steps gradient_checkpointing gradient_checkpointing_kwargs
        hub_always_push hub_model_id hub_private_repo hub_revision hub_strategy hub_token kl_coef
        kl_estimator lam learning_rate load_in_4bit load_in_8bit local_rank local_rollout_forward_batch_size
        lora_alpha lora_dropout lora_modules_to_save lora_r lora_target_modules lora_target_parameters
        lora_task_type lr_scheduler_kwargs lr_scheduler_type max_steps missing_eos_penalty
        model_name_or_path model_revision no_signal_patience num_mini_batches num_ppo_epochs
        num_sample_generations optim optim_args optim_target_modules output_dir per_device_eval_batch_size
        per_device_train_batch_size project push_to_hub report_to response_length resume_from_checkpoint
        reward_funcs reward_model_path reward_options reward_weights run_name save_on_each_node save_only_model
        save_steps save_strategy save_total_limit seed sft_model_path stop_on_no_signal stop_token stop_token_id
        system_prompt temperature tf32 total_episodes trackio_bucket_id trackio_space_id
        trackio_static_space_id trust_remote_code use_cpu use_dora use_peft use_rslora value_model_path
        vf_coef warmup_steps weight_decay whiten_rewards
    """.split()),
}
SCRIPTS = {"grpo": grpo, "ppo": ppo}


def parser_of(name: str):
    """The script's parser with the script's own defaults, as its __main__ builds it."""
    from dataclasses import fields

    from trl import GRPOConfig, ModelConfig
    from trl.experimental.ppo import PPOConfig

    script = SCRIPTS[name]
    config = GRPOConfig if name == "grpo" else PPOConfig
    arguments = script.GRPOScriptArguments if name == "grpo" else script.PPOScriptArguments
    parser, _, _ = script_parser(script)
    all_fields = {f.name for cls in (arguments, config, ModelConfig) for f in fields(cls)}
    return parser, all_fields


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_option_is_audited(name):
    _, all_fields = parser_of(name)
    unsupported = set(SCRIPTS[name].UNSUPPORTED_OPTIONS)
    assert not unsupported & ACTS[name], "an option cannot both act and be refused"
    assert all_fields == ACTS[name] | unsupported, (
        f"new options: {sorted(all_fields - ACTS[name] - unsupported)}; "
        f"gone: {sorted((ACTS[name] | unsupported) - all_fields)}."
        " Check what each new one does in the trainer and add it to ACTS or to the script's UNSUPPORTED_OPTIONS")


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_unsupported_option_is_refused_when_set(name):
    from options import refuse_ignored_fields

    parser, _ = parser_of(name)
    defaults = vars(parser.parse_known_args([])[0])
    values = parser.parse_known_args([])[0]
    refuse_ignored_fields(SCRIPTS[name].UNSUPPORTED_OPTIONS, defaults, values)  # the defaults pass: no false alarm
    for option in SCRIPTS[name].UNSUPPORTED_OPTIONS:
        default = getattr(values, option)
        setattr(values, option, object())
        with pytest.raises(SystemExit, match=f"error: --{option} is not supported here: "):
            refuse_ignored_fields(SCRIPTS[name].UNSUPPORTED_OPTIONS, defaults, values)
        setattr(values, option, default)


# (script, flags, YAML keys, the option refused): each refused option as a flag, as a key of a --config YAML (which
# TrlParser turns into parser defaults), and both at once
REFUSED = [
    ("ppo", {"eval_strategy": "steps"}, {}, "eval_strategy"),
    ("ppo", {}, {"logging_steps": 3}, "logging_steps"),
    ("ppo", {"bf16": "true"}, {}, "bf16"),
    ("ppo", {"ds3_gather_for_generation": "false"}, {}, "ds3_gather_for_generation"),  # for ZeRO-3, which PPO refuses
    ("ppo", {"do_eval": "true"}, {}, "do_eval"),  # listed as acting once, though only Trainer's loop reads it
    ("ppo", {}, {"max_grad_norm": 0.1}, "max_grad_norm"),
    ("ppo", {"max_grad_norm": 0.5}, {"max_grad_norm": 0.1}, "max_grad_norm"),
    ("ppo", {"learning_rate": 1e-4}, {"logging_steps": 3, "learning_rate": 1e-5}, "logging_steps"),
    ("grpo", {}, {"remove_unused_columns": True}, "remove_unused_columns"),
    ("grpo", {"remove_unused_columns": "true"}, {"remove_unused_columns": True}, "remove_unused_columns"),
]


@pytest.mark.parametrize("name, flags, keys, option", REFUSED)
def test_refused_from_a_flag_a_yaml_key_or_both(tmp_path, name, flags, keys, option):
    import yaml
    from options import parse_args

    parser, _ = parser_of(name)
    argv = [str(a) for k, v in flags.items() for a in (f"--{k}", v)]
    if keys:
        (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(keys))
        argv += ["--config", str(tmp_path / "recipe.yaml")]
    with pytest.raises(SystemExit, match=f"error: --{option} is not supported here: "):
        parse_args(parser, SCRIPTS[name].UNSUPPORTED_OPTIONS, argv)


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_recipe_of_acting_options_is_not_refused(tmp_path, name):
    """The refusal compares with the script's defaults, not the YAML's: a recipe that sets only options that act
    (here, one from each of the three dataclasses) runs, and its values arrive."""
    import yaml
    from options import parse_args

    parser, _ = parser_of(name)
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump({"learning_rate": 1e-5, "lora_r": 4, "system_prompt": "Hi."}))
    script_args, training_args, model_args = parse_args(parser, SCRIPTS[name].UNSUPPORTED_OPTIONS,
                                                        ["--config", str(tmp_path / "recipe.yaml"), "--seed", "3"])
    assert (training_args.learning_rate, model_args.lora_r, script_args.system_prompt, training_args.seed) == \
           (1e-5, 4, "Hi.", 3)


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_default_run_is_its_recipe(name, monkeypatch):
    """Every default of a run without flags comes from recipes/tiny/<algo>.yaml: from the repository root,
    `--config recipes/tiny/<algo>.yaml` resolves to the same settings (paths relative, then, not absolute), and
    only the keys the recipe marks `# tuned` are the ones the tiny-settings warning watches."""
    import os
    from dataclasses import asdict

    from conftest import REPO

    monkeypatch.chdir(REPO)
    parser, defaults, tuned = script_parser(SCRIPTS[name])
    assert set(tuned) < set(defaults) and {"learning_rate"} <= set(tuned) and "seed" not in tuned
    plain = parser.parse_args_and_config([])
    parser, _, _ = script_parser(SCRIPTS[name])
    recipe = parser.parse_args_and_config(["--config", f"recipes/tiny/{name}.yaml"])
    for a, b in zip(plain, recipe):
        a, b = asdict(a), asdict(b)
        assert a.keys() == b.keys()
        for key in a:
            if key in ("model_name_or_path", "dataset_name"):
                assert a[key] == os.path.abspath(b[key]) == defaults[key]
            else:
                assert a[key] == b[key], key


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_default_never_depends_on_the_disk(name, tmp_path, monkeypatch):
    """The default run's settings are the same before and after its output folder, or the bundled model's, exists:
    the model and data resolve from the script's folder whether they are there or not, and `output_dir` stays as
    the recipe writes it (relative to where the run starts)."""
    from dataclasses import asdict

    from options import set_default_run

    script = SCRIPTS[name]
    root = tmp_path / "copy"
    (root / "recipes" / "tiny").mkdir(parents=True)
    recipe = root / "recipes" / "tiny" / f"{name}.yaml"
    recipe.write_text(script.DEFAULT_RECIPE.read_text())
    monkeypatch.chdir(root)

    def resolved():
        parser, _ = parser_of(name)
        set_default_run(parser, recipe, root=root)
        return [asdict(args) for args in parser.parse_args_into_dataclasses(args=[])], parser.format_help()

    before = resolved()
    for key in ("output_dir", "model_name_or_path", "dataset_name"):
        (root / before[0][1 if key == "output_dir" else 0 if key == "dataset_name" else 2][key]).mkdir(parents=True)
    assert resolved() == before
    assert before[0][2]["model_name_or_path"] == str(root / "assets" / "tiny-llama-addition")


# (command line, YAML recipe, what the one error line says): every mistake of the command line or a recipe
MISTAKES = [
    (["--learning_rte", "1e-5"], None, "error: unknown option --learning_rte; did you mean --learning_rate?"),
    (["--learning-rte=1e-5"], None, "error: unknown option --learning-rte; did you mean --learning_rate?"),
    (["oops"], None, "error: unexpected argument 'oops'"),
    (["--learning_rate", "fast"], None, "error: argument --learning_rate/--learning-rate: invalid float value: 'fast'"),
    (["--max_steps"], None, "error: argument --max_steps/--max-steps: expected one argument"),
    (["--config"], None, "error: --config needs the path of a YAML recipe"),
    (["--config", "no-such.yaml"], None, "error: --config no-such.yaml: no such file or directory"),
    ([], "learning_rte: 1.0e-5\n", "error: {recipe}: unknown key 'learning_rte'; did you mean learning_rate?"),
    ([], "learning_rate: fast\n", "error: {recipe}: learning_rate: 'fast' is not a number"),
    ([], "seed: 4.5\n", "error: {recipe}: seed: 4.5 is not an integer"),
    ([], "use_peft: maybe\n", "error: {recipe}: use_peft: 'maybe' is not true or false"),
    ([], "lr_scheduler_type: cos\n", "error: {recipe}: lr_scheduler_type: 'cos' is not one of linear, cosine,"),
    ([], "max_steps: [1\n", "error: --config {recipe} is not valid YAML (line 2)"),
    ([], "- max_steps\n", "error: --config {recipe} must hold `option: value` lines"),
]


@pytest.mark.parametrize("name", SCRIPTS)
@pytest.mark.parametrize("argv, yaml_text, message", MISTAKES)
def test_every_mistake_is_one_sentence(tmp_path, capsys, name, argv, yaml_text, message):
    """A mistyped option, a bad value, a broken recipe: one `error:` line, naming the nearest valid option where
    there is one, before anything is built (argparse's own errors print no usage)."""
    from options import parse_args

    recipe = tmp_path / "recipe.yaml"
    if yaml_text is not None:
        recipe.write_text(yaml_text)
        argv = argv + ["--config", str(recipe)]
    parser, _ = parser_of(name)
    with pytest.raises(SystemExit) as stop:
        parse_args(parser, SCRIPTS[name].UNSUPPORTED_OPTIONS, argv)
    assert str(stop.value.code).startswith(message.format(recipe=recipe)), stop.value.code
    assert "\n" not in str(stop.value.code) and capsys.readouterr() == ("", "")


@pytest.mark.parametrize("name", SCRIPTS)
def test_help_starts_with_the_scripts_own_options(name):
    """--help: a one-line usage naming --config, a pointer to docs/options.md, the script's own options before TRL's,
    and none of the options the script refuses."""
    from options import describe_options

    parser, _ = parser_of(name)
    describe_options(parser, SCRIPTS[name].UNSUPPORTED_OPTIONS)
    text = parser.format_help()
    usage, description = text.split("\n\n")[:2]
    assert usage.count("\n") == 0 and "--config recipe.yaml" in usage
    assert "docs/options.md" in description
    ours, trls = text.index("the script's own options"), text.index("TRL's options")
    assert ours < text.index("--reward_funcs") < trls < text.index("--learning_rate")
    assert [option for option in SCRIPTS[name].UNSUPPORTED_OPTIONS if f"--{option} " in text] == []


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_documented_defaults_are_the_scripts(name):
    """docs/options.md's table for each script gives the defaults a run without flags gets on this machine, for every
    row that names one flag and one value. Activation checkpointing's default depends on the machine, for both
    scripts alike (parse_args), and the table says so."""
    import re
    from dataclasses import asdict

    import torch
    from conftest import REPO
    from options import parse_args

    text = (REPO / "docs" / "options.md").read_text()
    rows = dict(re.findall(r"^\| `--(\w+)` \| ([^|]*) \|", text.split("## PPO's flags")[name == "ppo"], re.M))
    assert rows["activation_checkpointing"].strip() == "on a GPU, off on a CPU"
    parser, _ = parser_of(name)
    resolved = {k: v for args in parse_args(parser, SCRIPTS[name].UNSUPPORTED_OPTIONS, []) for k, v in
                asdict(args).items()}
    checked = 0
    for flag, default in rows.items():
        default = default.strip().strip("`").replace("on a GPU, off on a CPU",
                                                     "on" if torch.cuda.is_available() else "off")
        value = resolved[flag]
        if isinstance(value, bool):
            assert (default in ("on", "true")) is value and default in ("on", "off", "true", "false"), (flag, default)
        elif isinstance(value, (int, float)) and re.fullmatch(r"[-\d.e]+", default):
            assert float(default) == value, (flag, default, value)
        elif isinstance(value, str) and re.fullmatch(r"[\w/.-]+", default):
            assert value == default, (flag, default, value)
        else:
            continue
        checked += 1
    assert checked >= 8


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_recipe_may_give_one_value_for_a_list(tmp_path, name):
    """`reward_funcs: accuracy` in a recipe is the list [accuracy], not the characters of "accuracy"; ModelConfig
    keeps `lora_target_modules: all-linear` as peft's shorthand."""
    from options import parse_args

    (tmp_path / "recipe.yaml").write_text("reward_funcs: accuracy\nlora_target_modules: all-linear\n")
    parser, _ = parser_of(name)
    script_args, _, model_args = parse_args(parser, SCRIPTS[name].UNSUPPORTED_OPTIONS,
                                            ["--config", str(tmp_path / "recipe.yaml")])
    assert script_args.reward_funcs == ["accuracy"] and model_args.lora_target_modules == "all-linear"
