"""Mutation testing of the code behind the lab's verdicts, one module at a time (docs/testing.md).

    python tests/mutation.py engine/claims.py            # mutate it, run its tests, print the score
    python tests/mutation.py engine/claims.py --show     # ... and the diff of every survivor
    python tests/mutation.py engine/claims.py --survivors  # retest them after adding tests
    python tests/mutation.py engine/rules.py --only Rule.row_metrics   # one method (or a glob of mutants)

mutmut (the ``test`` extra) plants one small bug at a time (``<`` for ``<=``, ``+ 1`` on a
constant, a dropped argument, ...) and runs the module's own tests against it: a mutant no test
notices is a bug the tests would let through. Each module gets its own work folder
(``.mutation/MODULE``, git-ignored) holding a generated mutmut configuration (this module only,
its narrow tests, serially) and links to the sources, so runs of different modules never share
results and a rerun retests only what changed. mutmut forks one process per mutant; run it at
low priority on one worker (``nice -n 10``, the default ``--max-children 1``). A mutant whose
tests run past ``--timeout-multiplier`` times their clean duration (plus a second) is stopped and
counts as a timeout; torch and its BLAS run single-threaded there (``OMP_NUM_THREADS=1``): a thread
pool started before mutmut forks the test process hung it on a lock (0 % CPU) in past runs.

The score is killed / (mutants - those judged equivalent), where a timeout or an abort (SIGABRT,
e.g. ONNX Runtime aborting the test process) counts as killed (the mutant changed behaviour) and
a mutant no test reaches as survived. Equivalent mutants (the code
behaves the same, e.g. ``x[:40]`` for ``x[:41]`` on a string cut for display only) are listed with
the reason in ``tests/mutation_equivalent.txt``.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the code behind every verdict and published number
SCOPE = ("engine/rules.py", "engine/softmax.py", "engine/theory.py", "engine/claims.py",
         "engine/training/*.py", "engine/experiments/*.py", "engine/readers/*.py",
         "engine/probe/*.py", "engine/probe/port/*.py")
#: the fast tests of the ONNX port audit (tests/engine/probe/port/)
_ONNX_FAST = tuple(f"tests/engine/probe/port/test_{name}.py" for name in (
    "onnx_audit", "onnx_fused", "onnx_unfused", "compare", "result", "onnx_graph", "onnx_sites",
    "onnx_run"))
#: tests beyond the module's own tests/engine/.../test_NAME.py
EXTRA_TESTS = {
    "engine/softmax.py": ("tests/engine/test_softmax_edges.py",),
    "engine/rules.py": ("tests/engine/test_scale_controls.py", "tests/engine/test_shift_invariance.py"),
    # length_theory, row_var_theory and the moments are tested with the length sweep and the
    # simulation too (a first run with test_theory.py alone reached none of them)
    "engine/theory.py": ("tests/engine/test_theory_formulas.py", "tests/engine/test_length.py",
                         "tests/engine/test_simulate.py",
                         "tests/engine/test_shift_invariance.py"),
    "engine/claims.py": ("tests/engine/test_claims_statistics.py",
                         "tests/engine/test_claims_experiment.py",
                         "tests/engine/test_claims_loading.py"),
    "engine/experiments/point.py": ("tests/engine/test_claims_statistics.py",),
    "engine/experiments/select.py": ("tests/engine/test_claims_statistics.py",
                                     "tests/engine/test_claims_experiment.py",
                                     "tests/engine/experiments/test_sensitivity.py"),
    "engine/experiments/sensitivity.py": ("tests/engine/experiments/test_logit_control.py",),
    "engine/training/qk_clip.py": ("tests/engine/training/test_scale_controls_training.py",),
    "engine/training/config.py": ("tests/engine/training/test_config_edges.py",),
    "engine/experiments/folder.py": ("tests/engine/experiments/test_folder_files.py",),
    # the figures and verdicts from hand-made results (the length sweep's, the sensitivity's,
    # the transfer's and the summary's cases reach them too)
    "engine/experiments/figures.py": tuple(f"tests/engine/experiments/test_{name}.py" for name in (
        "verdict", "summary", "sensitivity", "transfer", "length", "recall_length",
        "figures_builders")),
    "engine/readers/json_file.py": ("tests/engine/readers/test_schema.py",),
    "engine/probe/scale_fit.py": ("tests/engine/probe/test_bands.py",
                                  "tests/engine/probe/test_audit.py"),
    "engine/probe/softcap_fit.py": ("tests/engine/probe/test_bands.py",),
    "engine/probe/audit.py": ("tests/engine/probe/test_bands.py",
                              "tests/engine/probe/test_audit_verdicts.py",
                              "tests/engine/probe/test_audit_sites.py"),
    "engine/probe/stats.py": ("tests/engine/probe/test_stats_edges.py",),
    "engine/probe/declared.py": ("tests/engine/probe/test_declared_rules.py",),
    "engine/probe/training_audit.py": ("tests/engine/probe/test_training_weights.py",),
    "engine/probe/sweep.py": ("tests/engine/probe/test_sweep_edges.py",),
    # (no test_model_folder.py: the folder checks are tested with the loader's)
    "engine/probe/model_folder.py": ("tests/engine/probe/test_loader.py",
                                     "tests/engine/probe/test_model_folder_files.py",
                                     "tests/engine/probe/test_model_folder_edges.py"),
    "engine/probe/summary.py": ("tests/engine/probe/test_summary_figures.py",),
    "engine/probe/coverage.py": ("tests/engine/probe/test_coverage_modules.py",),
    "engine/probe/memory.py": ("tests/engine/probe/test_memory_counts.py",),
    "engine/probe/position.py": ("tests/engine/probe/test_position_fits.py",),
    "engine/probe/accounting.py": ("tests/engine/probe/test_bands.py",
                                   "tests/engine/probe/test_audit_verdicts.py"),
    # (the per-rule results from hand-made snapshots)
    "engine/experiments/job.py": ("tests/engine/experiments/test_job_results.py",),
    # the loop against a plain torch loop and its bookkeeping on tiny configs, and the gradient
    # norms against autograd
    "engine/training/trainer.py": ("tests/engine/training/test_trainer_loop.py",
                                   "tests/engine/training/test_trainer_grad_norms.py"),
    # attention calls written by hand (no transformers model: test_capture.py's tiny models take
    # 1-20 s each, and they reach record_call only through a whole forward pass)
    "engine/probe/sites.py": ("tests/engine/probe/test_sites_records.py",),
    # the toy model of tests/engine/probe/toy_attention.py (milliseconds to build)
    "engine/probe/tap.py": ("tests/engine/probe/test_tap_calls.py",),
    "engine/probe/capture.py": ("tests/engine/probe/test_capture_records.py",),
    "engine/probe/backends.py": ("tests/engine/probe/test_backends_toy.py",),
    # every rule's attention, the whole model and its streamed pass against a loop over rows
    "engine/training/model.py": ("tests/engine/training/test_model_math.py",),
    # tiny transformers models in memory, a saved folder, stand-in tokenizers and configs
    "engine/probe/loader.py": ("tests/engine/probe/test_loader_models.py",),
    # the GGUF side of the port audit: hand-made metadata, configs, source fits and small files
    # written by the gguf package (test_gguf_audit.py's tiny models: 2 to 20 s each)
    "engine/probe/port/gguf_audit.py": ("tests/engine/probe/port/test_gguf_audit_rows.py",),
    "engine/probe/port/gguf_weights.py": ("tests/engine/probe/port/test_gguf_weights_bounds.py",
                                          "tests/engine/probe/port/test_gguf_weights_audit.py"),
    "engine/probe/port/llama_cpp.py": ("tests/engine/probe/port/test_llama_cpp_texts.py",),
    # (test_onnx_fused.py runs real ONNX graphs, 3 s a mutant: the fast files cover more)
    "engine/probe/port/fused_fit.py": ("tests/engine/probe/port/test_fused_fit_bands.py",),
    "engine/probe/port/fused_ops.py": ("tests/engine/probe/port/test_fused_ops_layouts.py",),
    # the ONNX port audit: hand-built graphs (onnx.helper) and hand-made fits, each well under a
    # second; the round trips of exported zoo models are left out (DESELECT); onnx_graph.py and
    # roundtrip.py run with their own file only (the graph walk's hand-built graphs; stand-ins
    # for the zoo and the exporter), the files above take 35 to 65 s a run on a shared machine
    **{f"engine/probe/port/{name}.py": _ONNX_FAST for name in (
        "onnx_audit", "compare", "result", "onnx_sites", "onnx_run", "export")},
    # the adapters: what each call reports, checked by hand on one tiny model per layout
    "engine/probe/adapters_fused.py": ("tests/engine/probe/test_adapters_fused_calls.py",),
    # (and hand-made stand-ins of each attention class: the calls' tiny models take seconds each)
    "engine/probe/adapters_seq.py": ("tests/engine/probe/test_adapters_seq_calls.py",
                                     "tests/engine/probe/test_adapters_seq_standins.py"),
    "engine/probe/adapters_bert.py": ("tests/engine/probe/test_adapters_bert_calls.py",
                                      "tests/engine/probe/test_adapters_bert_toys.py"),
    # a hand-made stand-in of DeBERTa's attention, hooked in every test (the tiny models of
    # test_adapters_deberta.py are built once per file: each hook reached only its first test)
    "engine/probe/adapters_deberta.py": ("tests/engine/probe/test_adapters_deberta_hooks.py",),
}
#: the probe tests that build a transformers model, and the 40-head soft-cap kernels test
_PROBE_SLOW = tuple(f"tests/engine/probe/{name}" for name in (
    "test_audit.py::test_gpt2_saved_without_scaling_is_unscaled_in_every_layer",
    "test_audit.py::test_gpt2_inverse_layer_idx_is_one_over_layer_plus_one",
    "test_audit.py::test_injected_bugs_on_a_tiny_bert_and_the_scale_is_restored",
    "test_audit.py::test_inject_refuses_a_layer_out_of_range_and_an_unknown_kind",
    "test_audit.py::test_whatif_on_a_causal_model_gives_perplexity",
    "test_audit.py::test_training_lab_weights_are_audited_by_rule",
    "test_audit.py::test_after_softmax_and_twice_on_gpt2_change_the_output",
    "test_bands.py::test_the_true_cap_is_as_declared_whatever_computes_the_tanh",
))
#: tests left out of a module's runs: each costs seconds to minutes per mutant (the whole shipped
#: claims file read, about 8 s; a real training run, 13 s), and faster tests cover what they
#: reach (tests/engine/test_claims_loading.py: small hand-written claims files, stub runs)
DESELECT = {
    "engine/claims.py": tuple(f"tests/engine/{name}" for name in (
        "test_claims.py::test_every_claim_is_printed_where_it_says",
        "test_claims.py::test_moving_the_saturation_cut_fails_the_readme_rows",
        "test_claims.py::test_the_shipped_file_is_valid_json_with_unique_ids",
        "test_claims.py::test_a_probe_claim_without_the_models_extra_is_skipped",
        "test_claims_experiment.py::test_the_statistics_are_those_of_the_job_files",
        "test_claims_experiment.py::test_a_rerun_reproduces_every_figure_bit_for_bit",
        "test_claims_experiment.py::test_the_cache_is_reused_without_a_pool",
        "test_claims_experiment.py::test_a_cached_job_of_another_fingerprint_is_rerun_not_used",
        "test_claims_experiment.py::test_jobs_that_ran_under_another_fingerprint_fail_their_claims",
        "test_claims_experiment.py::test_a_claim_that_does_not_hold_fails_and_one_that_does_passes",
    )),
    # the probe's fits: the tests that build a transformers model (1-20 s each) and the 40-head
    # soft-cap kernels test (13 s) reach every fit; the hand-made cases (test_scale_fit.py,
    # test_softcap_fit.py) cover what they check; the declared cap's band (8 s) is the soft-cap's
    "engine/probe/scale_fit.py": _PROBE_SLOW + (
        "tests/engine/probe/test_bands.py::test_a_declared_cap_reproduces_p_inside_its_band",),
    "engine/probe/softcap_fit.py": _PROBE_SLOW,
    "engine/probe/audit.py": _PROBE_SLOW,
    "engine/probe/accounting.py": _PROBE_SLOW + (
        "tests/engine/probe/test_bands.py::test_a_declared_cap_reproduces_p_inside_its_band",),
    # each audits a tiny transformers model (2 to 20 s); test_declared_rules.py checks every rule
    # on plain config objects, and the two DeepSeek tests left call declare() directly
    "engine/probe/declared.py": tuple(f"tests/engine/probe/test_declared.py::test_{name}" for name in (
        "esm_scales_q_before_rope_and_passes_1_and_is_as_declared",
        "falcon_h1_key_multiplier_is_part_of_the_declared_scale",
        "q_and_k_each_scaled_by_d_to_the_minus_quarter_is_no_false_alarm",
        "a_planted_bug_is_found_where_the_declaration_is_unknown",
        "longrope_attention_factor_on_cos_and_sin_is_declared",
        "openai_privacy_filter_scales_q_and_k_by_its_scaling_attribute",
        "gemma2_query_pre_attn_scalar_256_at_head_dim_16_is_not_scaled_twice",
        "gemma3_is_not_scaled_by_one_over_sqrt_d_model",
        "a_tiny_deepseek_v3_at_factor_40_measures_1874_as_declared",
        "mscale_all_dim_outside_deepseeks_family_is_not_a_softmax_factor",
        "deepseek_mla_layers_are_called_mla_not_qk_norm",
        "clip_text_encoder_is_a_causal_encoder_not_a_decoder",
    )),
    # a real job (4.5 s) and a subprocess that imports torch (4 s): neither reads more of the
    # fingerprint than the fast tests do
    "engine/experiments/fingerprint.py": tuple(
        f"tests/engine/experiments/test_fingerprint.py::{name}" for name in (
            "test_a_job_records_the_kernels_it_ran_on_and_its_fingerprint",
            "test_torch_that_already_ran_is_reported_not_hidden",
        )),
    # a real experiment run and a resume per case (13 s in all): test_folder_files.py reads
    # hand-written job files and experiment.json files instead
    "engine/experiments/folder.py": tuple(
        f"tests/engine/experiments/test_folder.py::{name}" for name in (
            "test_a_bad_job_file_is_ignored_with_its_reason_and_rerun",
            "test_resume_refuses_a_bad_experiment_json_before_running",
        )),
    # the science runs of the presets and the reproducibility runs (1 to 8 s each, about 25 s
    # in all): test_trainer_loop.py checks the same loop on tiny configs, its own runs shared
    "engine/training/trainer.py": tuple(f"tests/engine/training/test_trainer.py::test_{name}" for name in (
        "entropy_at_step0_is_ordered_none_sqrt_dk_at_large_dk", "the_gap_grows_with_head_width",
        "same_seed_same_metrics_and_other_seed_differs",
        "pause_resume_and_reset_reproduce_the_uninterrupted_run",
        "snapshot_shapes_logs_and_csv_rows", "a_diverged_run_stops_and_the_others_go_on",
        "entropy_collapse_is_marked_for_the_saturated_head", "the_two_bugs_at_step0",
        "an_inf_gradient_at_a_log_step_marks_the_run_diverged",
        "sgd_trains_from_the_same_start_as_adam", "the_fixed_logit_bins_resolve_every_rule_at_step0",
        "evaluation_at_other_lengths_is_logged_and_changes_nothing_else",
    )),
    # tiny transformers models (1-20 s a test, 60 s the file): test_capture_records.py packs
    # hand-made records and routes the toy model of toy_attention.py through the capture
    "engine/probe/capture.py": ("tests/engine/probe/test_capture.py",),
    # zoo models (Llama, Gemma 2, GPT-Neo: seconds each); test_backends_toy.py compares the
    # toy model under backends registered by the test
    "engine/probe/backends.py": ("tests/engine/probe/test_backends.py",),
    # tiny transformers models exported and audited (45 s a run): test_gguf_audit_rows.py
    # checks each row and the audit's stages on hand-made metadata, configs and source fits
    "engine/probe/port/gguf_audit.py": ("tests/engine/probe/port/test_gguf_audit.py",),
    # a zoo Llama written as Q8_0 and audited (about 20 s): test_gguf_weights_audit.py feeds
    # weights_audit a hand-made net, file tensors and fits instead
    "engine/probe/port/gguf_weights.py": tuple(
        f"tests/engine/probe/port/test_gguf_weights.py::test_{name}" for name in (
            "an_intact_q8_0_file_has_no_weights_finding",
            "a_row_swap_in_a_q8_0_file_is_found_in_its_layer")),
    # a real length sweep (20 s); the hand-made results of the same file stay
    "engine/experiments/figures.py": (
        "tests/engine/experiments/test_length.py::test_the_length_columns_are_in_the_experiment_csv_files",
        # a real recall grid (14 s); test_figures_builders.py feeds hand-made results instead
        "tests/engine/experiments/test_recall_length.py::test_a_recall_grid_with_eval_every_keeps_the_last_evaluation",),
    # the ONNX port audit: the round trips export four zoo models with torch.onnx.export (35 s
    # for the module's fixture, 1-2 s per audit); the hand-built graphs of the fast tests reach
    # the same code (each prefix deselects every case of that test)
    **{f"engine/probe/port/{name}.py": tuple(
        f"tests/engine/probe/port/test_onnx_audit.py::test_{t}" for t in (
            "an_export_reads_as_its_source", "an_edited_scale_constant", "one_head_scaled",
            "a_factor_on_q_before_the_product"))
       for name in ("onnx_audit", "compare", "result", "onnx_sites", "onnx_graph", "onnx_run",
                    "export", "roundtrip")},
}
# the adapters' own tests audit a tiny model per case (fits and bootstrap: 20 to 60 s a file);
# the *_calls.py tests check what each call reports, by hand, on models built once per file
DESELECT.update({f"engine/probe/{name}.py": (f"tests/engine/probe/test_{name}.py",)
                 for name in ("adapters_fused", "adapters_seq", "adapters_bert")})
# eight tiny models, each rebuilt per mutant (minutes a mutant on a loaded machine): the stand-ins
# of test_adapters_seq_standins.py reach every call path instead; the declared() test stays
DESELECT["engine/probe/adapters_seq.py"] += tuple(
    f"tests/engine/probe/test_adapters_seq_calls.py::test_{name}" for name in (
        "each_call_reports", "the_probabilities_come_back", "planted_factors_reach"))
# (and the bert calls' per-family tests and refusals: 15 tiny models, 90 s a run on a shared
# machine; test_adapters_bert_toys.py hands stand-in modules of each layout to the hooks)
DESELECT["engine/probe/adapters_bert.py"] += tuple(
    f"tests/engine/probe/test_adapters_bert_calls.py::test_{name}" for name in (
        "each_call_reports_q_k_and_the_models_probabilities",
        "the_output_is_the_modules_and_the_probabilities_come_back_when_asked",
        "planted_factors_reach_q_k_and_the_weights", "what_the_adapter_does_not_read_is_refused"))
# (its tiny models: 1 to 5 s a test; the stand-in's tests cover what they check)
DESELECT["engine/probe/adapters_deberta.py"] = tuple(
    f"tests/engine/probe/test_adapters_deberta.py::test_{name}" for name in (
        "each_call_reports_q_k_the_relative_terms_and_the_models_probabilities",
        "planted_factors_reach_q_k_and_the_weights",
        "the_relative_terms_are_the_ones_the_product_used_with_a_factor_on_q",
        "talking_heads_are_refused"))
#: what the tests read besides the code and the tests
LINKED = ("engine", "tests", "resources", "ui", "docs", "main.py", "README.md", "mkdocs.yml")
EQUIVALENT = ROOT / "tests" / "mutation_equivalent.txt"
#: failed, pytest error, timed out (SIGXCPU), or aborted (SIGABRT: -6 from the fork, 134 from
#: a shell; e.g. ONNX Runtime aborting the process on a mutated session option)
KILLED = {1, 3, 24, -24, 36, 152, 255, -6, 134}


def in_scope(module: str) -> bool:
    return any(fnmatch.fnmatch(module, pattern) for pattern in SCOPE) and \
        not module.endswith("__init__.py")


def tests_for(module: str) -> list[str]:
    """The module's own test file (tests mirror the package layout) and the extra ones."""
    rel = Path(module).relative_to("engine")
    own = Path("tests/engine") / rel.parent / f"test_{rel.stem}.py"
    found = [str(own)] if (ROOT / own).exists() else []
    extra = [t for t in EXTRA_TESTS.get(module, ()) if t not in found and (ROOT / t).exists()]
    return found + extra


def config(module: str, tests: list[str], timeout_multiplier: float = 5.0) -> str:
    """pyproject.toml of the work folder: the project's pytest settings and mutmut's."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    pytest_block = re.search(r"^\[tool\.pytest\.ini_options\]\n(?:(?!^\[).*\n?)*", text, re.M)
    assert pytest_block is not None
    # xdist is off in the forked runs, and its options are then refused ("--dist worksteal")
    block = re.sub(r"\s*--dist[ =][^\s\"]+", "", pytest_block.group(0))
    return block + "\n" + "\n".join([
        "[tool.mutmut]",
        'source_paths = ["engine/"]',
        f"only_mutate = {json.dumps([module])}",
        f"also_copy = {json.dumps([p for p in LINKED if p not in ('engine', 'tests')])}",
        "pytest_add_cli_args = " + json.dumps(
            ["-p", "no:xdist", "-p", "no:cacheprovider", "-m", "not slow",
             *(arg for test in DESELECT.get(module, ()) for arg in ("--deselect", test))]),
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
        "use_git_change_detection = false",
        f"timeout_multiplier = {float(timeout_multiplier)}",
        "",
    ])


def prepare(module: str, tests: list[str], timeout_multiplier: float = 5.0) -> Path:
    work = ROOT / ".mutation" / module.replace("/", ".").removesuffix(".py")
    work.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        link = work / name
        if not link.is_symlink():
            link.symlink_to(ROOT / name)
    (work / "pyproject.toml").write_text(config(module, tests, timeout_multiplier), encoding="utf-8")
    return work


def equivalent() -> dict[str, str]:
    """mutant name -> why it is equivalent (tests/mutation_equivalent.txt)."""
    out = {}
    for line in EQUIVALENT.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, why = line.partition(" ")
            out[name] = why.strip()
    return out


def results(work: Path, module: str) -> dict[str, int | None]:
    """mutant name -> exit code of its last run (None: not run yet); empty before a first run."""
    meta = work / "mutants" / f"{module}.meta"
    if not meta.is_file():
        return {}
    return json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]


def score(codes: dict[str, int | None], same: dict[str, str]) -> tuple[int, int, list[str]]:
    """(killed, mutants that count, survivors): equivalent ones left out."""
    counted = {k: c for k, c in codes.items() if k not in same}
    survivors = sorted(k for k, c in counted.items() if c not in KILLED)
    return len(counted) - len(survivors), len(counted), survivors


def by_function(codes: dict[str, int | None], same: dict[str, str]) -> dict[str, tuple[int, int, int]]:
    """function -> (killed, non-equivalent mutants, not run yet) of its mutants."""
    groups: dict[str, dict[str, int | None]] = {}
    for key, code in codes.items():
        groups.setdefault(key.rpartition(".")[2].partition("__mutmut_")[0], {})[key] = code
    out = {}
    for function, group in groups.items():
        killed, total, _ = score({k: c for k, c in group.items() if c is not None}, same)
        out[function] = (killed, total, sum(1 for k, c in group.items() if c is None and k not in same))
    return out


def patterns(module: str, functions: list[str]) -> list[str]:
    """mutmut's names of the mutants of these functions: ``pkg.mod.x_f__mutmut_N`` for a
    function, ``pkg.mod.xǁClassǁmethod__mutmut_N`` for a method; a name that is already a
    mutant's name or a glob of them (it holds ``__mutmut_`` or ``*``) is kept as it is."""
    mod = module.removesuffix(".py").replace("/", ".")
    out = []
    for f in functions:
        if "__mutmut_" in f or "*" in f:
            out.append(f)
            continue
        cls, _, name = f.rpartition(".")
        out.append(f"{mod}.xǁ{cls}ǁ{name}__mutmut_*" if cls else f"{mod}.x_{name}__mutmut_*")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("module", help="a file in scope, e.g. engine/claims.py")
    ap.add_argument("--tests", nargs="+", help="test files (default: the module's own + extras)")
    ap.add_argument("--max-children", type=int, default=1)
    ap.add_argument("--show", action="store_true", help="print the diff of every survivor")
    ap.add_argument("--summary", action="store_true", help="only print the last run's score")
    ap.add_argument("--survivors", action="store_true",
                    help="retest only the last run's survivors (after adding tests)")
    ap.add_argument("--only", "--functions", nargs="+", metavar="NAME",
                    help="mutate and score only these functions (Class.method for a method) "
                         "or mutants (globs of mutmut's names, e.g. 'engine.rules.x_f__mutmut_*')")
    ap.add_argument("--timeout-multiplier", type=float, default=5.0,
                    help="a mutant's tests may run this many times their clean duration "
                         "(plus 1 s) before it counts as a timeout (mutmut's default is 15)")
    args = ap.parse_args(argv)
    module = args.module.replace(os.sep, "/")
    if not in_scope(module) or not (ROOT / module).is_file():
        print(f"mutation: {module!r} is not a module in scope ({', '.join(SCOPE)})",
              file=sys.stderr)
        return 2
    tests = args.tests or tests_for(module)
    if not tests:
        print(f"mutation: no tests found for {module}; give --tests", file=sys.stderr)
        return 2
    work = prepare(module, tests, args.timeout_multiplier)
    mutmut = str(Path(sys.executable).with_name("mutmut"))
    same = equivalent()
    if not args.summary:
        names = score(results(work, module), same)[2] if args.survivors else []
        wanted = patterns(module, args.only) if args.only else []
        if args.only:
            names = [n for n in names if any(fnmatch.fnmatchcase(n, w) for w in wanted)] \
                if args.survivors else wanted
        if (args.survivors or args.only) and not names:
            print(f"{module}: no mutants to (re)test")
        else:  # (mutmut reruns the mutants it is given by name, whatever their last result)
            # one thread: mutmut forks each mutant's run from a process that has already run
            # the tests, and a child forked after torch (OpenMP) started its threads can hang
            # on their lock at 0 % CPU (mutmut's limit is CPU time, so it would wait for ever)
            env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
            subprocess.run([mutmut, "run", "--max-children", str(args.max_children), *names],
                           cwd=work, check=False, env=env)
    codes = results(work, module)
    if args.only:
        wanted = patterns(module, args.only)
        codes = {k: c for k, c in codes.items() if any(fnmatch.fnmatchcase(k, w) for w in wanted)}
    not_run = sum(1 for k, c in codes.items() if c is None and k not in same)
    killed, total, survivors = score({k: c for k, c in codes.items() if c is not None}, same)
    judged = sum(1 for k in codes if k in same)
    print(f"{module}{' (' + ' '.join(args.only) + ')' if args.only else ''}: {killed} of "
          f"{total} mutants killed ({100 * killed / max(total, 1):.1f} %), {judged} judged "
          f"equivalent{f', {not_run} not run' if not_run else ''}; tests: {' '.join(tests)}")
    for function, (k, t, n) in sorted(by_function(codes, same).items()):
        print(f"  {function}: {k}/{t} killed" + (f", {n} not run" if n else ""))
    for name in survivors:
        print("survived:", name)
        if args.show:
            subprocess.run([mutmut, "show", name], cwd=work, check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
