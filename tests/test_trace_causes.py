"""Issue 13: every recompile reason shape torch 2.13 emits gets a cause and a
cure; limit hits under ``fullgraph=True``; the fixtures carry no machine paths.

Each case reads a trace recorded from a real run of a script in
``tests/trace_scripts`` under torch 2.13 (``python
tests/trace_fixtures/trim.py record NAME``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_trace import FIXTURES, SCRIPTS, fixture, fixture_text

from codemods.trace import read as tr
from codemods.transforms import BY_CODE

CODES = list(BY_CODE)


def entry_at(trace: tr.Trace, name: str, line: int) -> tr.CodeEntry:
    found = [e for e in trace.entries if e.name == name and e.firstlineno == line]
    assert len(found) == 1, [(e.name, e.firstlineno) for e in trace.entries]
    return found[0]


def script_line(name: str, line: int) -> str:
    return (SCRIPTS / f"{name}.py").read_text().splitlines()[line - 1].strip()


CASES = [
    # fixture, function, first line, graphs, cause, sources, cure (substring)
    ("anneal_float", "scaled_softmax", 5, 2, tr.FLOAT_ARG, ["temperature"], "FR003"),
    ("varargs_float", "generate", 5, 2, tr.FLOAT_ARG, ["sampling_kwargs['temperature']"], "FR003"),
    ("varargs_float", "blend", 9, 2, tr.FLOAT_ARG, ["args[1]"], "FR003"),
    ("int_global", "add_n", 8, 4, tr.INT_ARG, ["n"], "FR001"),
    ("growing_inputs", "normalize", 6, 8, tr.TENSOR_SHAPE, ["x"], "torch._dynamo.maybe_mark_dynamic(x, 0)"),
    ("shape_guards", "energy", 6, 4, tr.TENSOR_SHAPE, ["x"], "torch._dynamo.decorators.mark_unbacked(x, 0)"),
    ("shape_guards", "flat", 11, 2, tr.RANK, ["x"], "report: one graph per number of dims of `x` (1 recompile; dynamic shapes never make the rank symbolic): call the compiled code with one rank"),
    ("shape_guards", "rowsum", 16, 2, tr.LAYOUT, ["x"], "x.contiguous() at the calls"),
    ("module_counter", "forward", 11, 8, tr.MODULE_INT_ATTR, ["self.calls"], "FR005"),
    ("module_attrs", "forward", 18, 3, tr.MODULE_INT_ATTR, ["self.kv_cache.size"], "FR005"),
    ("module_attrs", "forward", 28, 4, tr.MODULE_INT_ATTR, ["self.layer_idx"], "FR005"),
    ("module_attrs", "forward", 37, 2, tr.TRAIN_EVAL, ["self.drop.training"], "bounded, no fix needed (1 recompile: one graph for train, one for eval)"),
    ("int_global", "shifted", 13, 4, tr.GLOBAL, ["SHIFT"], "FR011, pass `SHIFT` as an argument (an int: FR011's fix, unsafe), or keep it in a tensor updated with .fill_()"),
    # an int deciding a range() bound: specialised even when dynamic (evaluate_expr); FR001 is no cure
    ("int_range", "repeat_add", 8, 4, tr.INT_ARG, ["n"], "decides Python control flow (specialised even when dynamic): bucket its values or move the loop out (rule FR009)"),
    ("optimizer_lr", "step", None, 2, tr.OPTIMIZER_LR, ["self.param_groups[0]['lr']"], "FR004"),
    ("python_values", "stack_sum", 6, 3, tr.LENGTH, ["xs"], "report: `xs` has a new length every call"),
    ("python_values", "by_name", 11, 3, tr.LENGTH, ["d"], "report: `d` has a new length every call"),
    ("python_values", "apply", 16, 3, tr.IDENTITY, ["act"], "bounded, no fix needed (2 recompiles: one graph per object passed (a few functions or modules))"),
    ("python_values", "scaled", 29, 2, tr.TYPE, ["cfg"], "bounded, no fix needed (1 recompile: one graph per type)"),
    ("python_values", "call", 41, 2, tr.CLOSURE, ["scale"], "report: pass `scale` as an argument (rule FR008 for a closure compiled in a loop)"),
    ("global_state", "under_grad_mode", 6, 2, tr.GRAD_MODE, [], "bounded, no fix needed (1 recompile: one graph with grad, one without (no_grad, inference_mode))"),
    ("global_state", "under_autocast", 11, 2, tr.AUTOCAST, [], "bounded, no fix needed (1 recompile: one graph per autocast state)"),
    ("global_state", "maybe_grad", 16, 2, tr.REQUIRES_GRAD, ["x"], "bounded, no fix needed (1 recompile: one graph per requires_grad)"),
    ("dtype_other", "plus_one", 5, 3, tr.DTYPE, ["x"], "bounded, no fix needed (2 recompiles: one graph per dtype)"),
    ("item_resume", "torch_dynamo_resume_in_normalize_at_8", 8, 2, tr.RESUME_VALUE, ["___stack0"], "capture_scalar_outputs"),
    ("fullgraph_limit", "normalize", 6, 8, tr.TENSOR_SHAPE, ["x"], "maybe_mark_dynamic(x, 0)"),
    # a dynamic int attribute tested against a list (FastVideo's VSA impl before 3792707): named whole, with its
    # test; dynamic from the first compile, no graph is specialised to layer 0
    (
        "int_attr_membership", "forward", 25, 3, tr.MODULE_INT_ATTR, ["self.layer_idx"],
        "torch.compiler.config.dynamic_sources += \"L['self'].layer_idx,\" (no graph specialised to its first value; "
        "each outcome of the test (`not (self.layer_idx == 0 or self.layer_idx == 5)` at int_attr_membership.py:26) is still a graph",
    ),
]


@pytest.mark.parametrize("name,function,line,graphs,cause,sources,cure", CASES)
def test_every_recorded_reason_shape_has_a_cause_and_a_cure(
    name, function, line, graphs, cause, sources, cure
):
    trace = fixture(name)
    if line is None:
        [entry] = [e for e in trace.entries if e.name == function]
    else:
        entry = entry_at(trace, function, line)
        assert Path(entry.filename).name == f"{name}.py"
    assert entry.graphs == graphs
    assert entry.causes == [cause]
    if cause == tr.CLOSURE and entry.sources(cause) == ["fn.__closure__[0].cell_contents"]:
        # torch 2.9 gives no `(HINT: guard on "scale")`: the cell keeps torch's spelling
        sources, cure = entry.sources(cause), cure.replace("`scale`", "`fn.__closure__[0].cell_contents`")
    assert entry.sources(cause) == sources
    assert cure in tr.cure_label(entry, cause, CODES)
    if name == "int_range":
        assert "FR001" not in tr.cure_label(entry, cause, CODES)
        assert [r.specialized for r in entry.reasons] == [False, True, True]  # the first guard is a plain int specialisation
    # the table shows the same cause and cure
    rows = [r for r in tr.table_rows(trace, CODES) if r[1] == tr.display_location(entry)]
    assert any(r[4].startswith(cause) and cure in r[5] for r in rows), rows


def test_no_recorded_reason_is_other():
    """"other" is rare: none of the recorded runs' reasons lands there."""
    names = sorted(p.stem for p in FIXTURES.glob("*.log"))
    assert len(names) >= 15
    seen = set()
    for name in names:
        for e in fixture(name).entries:
            for r in e.reasons:
                assert r.cause != tr.OTHER, (name, r.text)
                seen.add(r.cause)
    # every cause the scripts were written to provoke was recorded
    assert {
        tr.FLOAT_ARG, tr.INT_ARG, tr.TENSOR_SHAPE, tr.MODULE_INT_ATTR, tr.OPTIMIZER_LR,
        tr.GLOBAL, tr.LENGTH, tr.CLOSURE, tr.RESUME_VALUE, tr.IDENTITY, tr.TYPE,
        tr.TRAIN_EVAL, tr.GRAD_MODE, tr.AUTOCAST, tr.REQUIRES_GRAD, tr.DTYPE, tr.RANK,
        tr.LAYOUT,
    } <= seen


def test_raw_reason_texts_of_the_recordings():
    """The shapes the issue names appear verbatim in the recorded reasons."""
    texts = {
        name: "\n".join(r.text for e in fixture(name).entries for r in e.reasons)
        for name in ("varargs_float", "module_attrs", "shape_guards", "python_values", "global_state", "item_resume")
    }
    assert "sampling_kwargs['temperature'] == 0.7" in texts["varargs_float"]
    assert "args[1] == 0.7" in texts["varargs_float"]
    assert "self._modules['kv_cache'].size == 0" in fixture_text("module_attrs")
    assert "self.layer_idx == 1" in texts["module_attrs"]
    assert "2 <= x.size()[0]" in texts["shape_guards"]
    assert "len(xs) == 1" in texts["python_values"]
    assert "___check_obj_id(act," in texts["python_values"]
    assert "___check_type_id(cfg," in texts["python_values"]
    assert "GLOBAL_STATE changed: grad_mode" in texts["global_state"]
    # 2.13: "autocast(cpu)_enabled"; 2.9: "autocast"
    assert "GLOBAL_STATE changed: autocast(cpu)_enabled" in texts["global_state"] or "GLOBAL_STATE changed: autocast\n" in texts["global_state"] + "\n"
    assert "requires_grad mismatch" in texts["global_state"]
    assert "___stack0 == 2.0" in texts["item_resume"]


def test_shape_dims_seen_to_vary():
    energy = entry_at(fixture("shape_guards"), "energy", 6)
    # 4 -> 5: size mismatch at index 0; then sizes 1 and 0 break `2 <= x.size()[0]`
    assert [r.dims for r in energy.reasons] == [(0,), (0,), (0,)]
    assert [tr.is_zero_one(r) for r in energy.reasons] == [False, True, True]
    assert tr.varying_dims(energy) == {"x": (0,)}
    # measured on 2.13 (sizes 4, 5, 1, 6, 0, 7): 4 graphs; with
    # maybe_mark_dynamic(x, 0) before each call 3 (sizes 0 and 1 still
    # specialise), with mark_unbacked(x, 0) 1
    assert tr.cure_label(energy, tr.TENSOR_SHAPE, CODES) == (
        "FR001, FR007, torch._dynamo.decorators.mark_unbacked(x, 0), size 1 specialised even when dynamic (maybe_mark_dynamic does not lift it)"
    )


def test_resume_frame_is_shown_as_the_code_after_the_graph_break():
    entry = entry_at(fixture("item_resume"), "torch_dynamo_resume_in_normalize_at_8", 8)
    assert tr.display_name(entry) == "normalize (after the graph break at line 8)"
    assert script_line("item_resume", 8) == "s = w.sum().item()"


def test_an_optional_argument_did_not_recompile_on_2_13():
    # None first (`return x`: no graph), then a tensor: one compile, no recompile
    entry = entry_at(fixture("python_values"), "maybe_bias", 46)
    assert entry.recompiles == 0 and not entry.reasons


@pytest.mark.parametrize(
    "reason,cause,source",
    [
        # spelled in torch/_dynamo/guards.py, not provoked by a recorded script
        ("0/0: bias is None", tr.NONE_CHECK, "bias"),
        ("0/0: L['bias'] is not None", tr.NONE_CHECK, "bias"),
        ("0/0: hasattr(L['m'], 'w')", tr.KEYS, "m.w"),
        ("0/0: not ___dict_contains('k', L['d'])", tr.KEYS, "d['k']"),
        # a tuple key (its comma splits nothing), a global read through its module (mujoco-torch before f234fb3)
        ("0/0: not ___dict_contains((torch.int64, 'cpu'), G['__import___main__']._TRI_ID._cache)", tr.KEYS, "_TRI_ID._cache[(torch.int64, 'cpu')]"),
        ("0/0: L['a'] is L['b']", tr.ALIASING, "a"),
        ("0/0: Duplicate tensors found: x, y", tr.ALIASING, "x, y"),
        # 2.13's form (mujoco-torch before dbf4ed8): both sources, as the user writes them
        ('0/0: Duplicate tensors found: ["args[1].qacc", "L[\'d\'].qacc_smooth"]', tr.ALIASING, "args[1].qacc, d.qacc_smooth"),
        ("0/0: tensor 'x' device mismatch. expected cpu, actual cuda:0", tr.DEVICE, "x"),
        # torch's own test of a model moved to another GPU (test_torchinductor.py)
        ("0/0: tensor 'L['x']' Tensor device index mismatch. Expected device index to be 0, actual 1", tr.DEVICE, "x"),
        ("0/0: tensor 'x' dispatch key set mismatch. expected A, actual B", tr.DISPATCH, "x"),
        ("0/0: GLOBAL_STATE changed: deterministic_algorithms ", tr.GLOBAL_STATE, "deterministic_algorithms"),
        ("0/0: ___check_torch_function_mode_stack()", tr.GLOBAL_STATE, ""),
        ("0/0: BACKEND_MATCH failure: torch.compile detected different backend callables.", tr.BACKEND, ""),
        ("0/0: Cache line invalidated because L['m'] got deallocated", tr.INVALIDATED, ""),
        ("0/0: ___tuple_iterator_len(L['it']) == 3", tr.LENGTH, "it"),
        ("0/0: mode == 'fast'", tr.CONSTANT, "mode"),
        ("0/0: int(L['n']) == 3", tr.INT_ARG, "n"),
        ("0/0: self.scale == 0.5", tr.MODULE_FLOAT_ATTR, "self.scale"),
        ("0/0: L['self']._modules['attn'].n_heads == 8", tr.MODULE_INT_ATTR, "self.attn.n_heads"),
        ("0/0: 2 <= n", tr.INT_ARG, "n"),
        ("0/0: x.size()[1] == y.size()[1]", tr.TENSOR_SHAPE, "x"),
        ("0/0: G['cfg'].lr == 0.1", tr.GLOBAL, "cfg.lr"),
        ("0/0: kwargs['cfg'].lr == 0.1", tr.FLOAT_ARG, "kwargs['cfg'].lr"),
        ("0/0: self.layers[0].idx == 1", tr.MODULE_INT_ATTR, "self.layers[0].idx"),
        # a value computed from one source: guarded where an op needed a Python number
        ("0/1: (1.0 + ((-1)*self._modules['drop_path'].drop_prob)) == 0.99", tr.MODULE_FLOAT_ATTR, "self.drop_path.drop_prob"),
        ("0/0: (1.0 - L['p']) == 0.9", tr.FLOAT_ARG, "p"),
        ("0/0: (L['a'] + L['b']) == 0.9", tr.FLOAT_ARG, "(a + b)"),  # two sources: shown as computed
        # an int counter kept in a param group is no hyperparameter of FR004's
        ("0/1: args[0].param_groups[0]['step'] == 1", tr.INT_ARG, "args[0].param_groups[0]['step']"),
        ("0/1: args[0].param_groups[0]['lr'] == 0.01", tr.OPTIMIZER_LR, "args[0].param_groups[0]['lr']"),
        ("0/1: args[0].param_groups[0]['lr'] == 1", tr.OPTIMIZER_LR, "args[0].param_groups[0]['lr']"),  # an int lr is still an lr
        ("0/0: not L['self'].state", tr.TRUTH, "self.state"),
        # a dynamic int tested against constants: its source, not the text up to `==` (`not (self.layer_idx`)
        ("0/1: not (self.layer_idx == 0 or self.layer_idx == 5)", tr.MODULE_INT_ATTR, "self.layer_idx"),
        ("0/1: not (L['self']._modules['attn'].layer_idx == 0 or L['self']._modules['attn'].layer_idx == 5)", tr.MODULE_INT_ATTR, "self.attn.layer_idx"),
        ("0/0: 2 <= L['self'].pos and L['self'].pos < 8", tr.MODULE_INT_ATTR, "self.pos"),
        ("0/0: L['cfg'].n != 4", tr.INT_ARG, "cfg.n"),
        ("0/0: L['n'] != 3 and L['n'] != 4", tr.INT_ARG, "n"),
        ("0/0: not (L['a'] == 1 or L['b'] == 2)", tr.OTHER, ""),  # two sources: no one value tested
        ("0/0: not L['self']._modules['drop'].training", tr.TRAIN_EVAL, "self.drop.training"),
    ],
)
def test_guard_shapes_from_torch_source(reason, cause, source):
    [parsed] = tr.parse_reason(reason)
    assert (parsed.cause, parsed.source) == (cause, source)


# -- limit hit under fullgraph=True ----------------------------------------------


def test_limit_hit_under_fullgraph_is_detected():
    entry = entry_at(fixture("fullgraph_limit"), "normalize", 6)
    assert entry.limit_hit is True
    assert entry.graphs == 8 and entry.recompiles == 8
    raw = fixture_text("fullgraph_limit")
    assert '"fail_type": "FailOnRecompileLimitHit"' in raw
    # 2.13: "Hard failure due to fullgraph=True"; 2.9: "recompile_limit reached with fullgraph=True"
    assert "Hard failure due to fullgraph=True" in raw or "recompile_limit reached with fullgraph=True" in raw
    row = [r for r in tr.table_rows(fixture("fullgraph_limit"), CODES) if r[0] == "normalize"]
    assert row and row[0][3] == "yes"


def test_float_storm_leads_a_rank_that_fails_beside_it():
    """HeavyBall's adam before a5d4a80 (fullgraph=True, dynamic=False): a new
    beta2 every step, grads of two ranks.  Rank fails in every recompile (the
    entries of the other rank fail on it) but shows 2 values; the float
    shows a new one each time and is the cause (it read "report: 8
    recompiles on tensor rank hit the limit", first)."""
    trace = fixture("fullgraph_float_storm")
    entry = entry_at(trace, "ema_", 9)
    assert entry.limit_hit and trace.hard_limit_failures == 1
    assert entry.causes == [tr.FLOAT_ARG, tr.RANK]
    assert entry.count(tr.RANK) >= entry.count(tr.FLOAT_ARG)
    assert tr.cure_label(entry, tr.RANK, CODES) == "bounded (2 distinct guard failures): the limit came from float argument `beta2`"
    assert "FR003" in tr.cure_label(entry, tr.FLOAT_ARG, CODES)


def test_a_soft_limit_is_no_hard_failure():
    """Without fullgraph the limit falls back to eager: the program goes on."""
    assert fixture("growing_inputs").hard_limit_failures == 0
    assert fixture("fullgraph_limit").hard_limit_failures == 1


def test_an_int_an_op_needed_is_specialised_and_not_cured_by_fr001():
    """ao's SAM2 mask generator before a52eb4b5d: crop boxes passed as int
    lists to a compiled bound method that does `torch.as_tensor(crop_box)`.
    The op needs the Python numbers, so torch guards each one whatever
    dynamic= says (the guard's comment ends "in run_node)"): 8 graphs and
    FailOnRecompileLimitHit, no dynamic=False anywhere.  The cure said
    "FR001"; it is to build the tensor outside and pass it in."""
    text = (
        "0/4: crop_box[0] == 0  # crop_box_torch = torch.as_tensor(crop_box, dtype=torch.float, device=boxes.device)"
        "  # mp/r5w/sam.py:22 in is_box_near_crop_edge (_dynamo/utils.py:4231 in run_node)"
    )
    [reason] = tr.parse_reason(text)
    assert (reason.cause, reason.source, reason.specialized) == (tr.INT_ARG, "crop_box[0]", True)
    assert reason.op_site == "`crop_box_torch = torch.as_tensor(crop_box, dtype=torch.float, device=boxes.device)` (sam.py:22)"
    entry = tr.CodeEntry("_process_batch", "sam.py", 36, graphs=8, limit_hit=True, reasons=[reason] * 7)
    assert tr.rule_cure_codes(entry, tr.INT_ARG, CODES) == []  # FR001 is the int's only rule: it lifts nothing here
    label = tr.cure_label(entry, tr.INT_ARG, CODES)
    assert "FR001" not in label and "needs a Python number at `crop_box_torch = torch.as_tensor(" in label and "pass it in" in label
    [row] = tr.table_rows(tr.Trace(entries=[entry]), CODES, found={})
    assert "FR001" not in row[5]  # not "FR001 found nothing here" either
    # the same guard without the comment an op leaves: automatic dynamic can lift it
    [plain] = tr.parse_reason("0/4: crop_box[0] == 0")
    assert not plain.specialized and plain.op_site == ""


def test_an_identity_guard_whose_type_is_a_repr_over_several_lines():
    """torch 2.11 writes `type=` as the guarded object's repr (2.13: its
    class); an optimizer's spans lines, which are one guard, not six."""
    text = (
        "2/0: ___check_obj_id(self, 139743483069712), type=SGD (\nParameter Group 0\n    dampening: 0\n    lr: 0.01\n"
        "    weight_decay: 0\n)  # for group in self.param_groups:  # optim/sgd.py:118 in step\n"
        'User stack trace:\n  File "@SITE@/torch/optim/sgd.py", line 118, in step\n    for group in self.param_groups:'
    )
    [reason] = tr.parse_reason(text)
    assert (reason.cause, reason.source, reason.line) == (tr.IDENTITY, "self", 118)
    assert reason.text == "___check_obj_id(self, 139743483069712), type=SGD (...)"


def test_an_int_field_of_a_plain_object_is_an_argument_not_a_module_attribute():
    """torchtitan#2823's `meta.max_q`: an int of a dataclass passed in is
    lifted by automatic dynamic like an int argument (measured: 2 graphs; 8
    and the limit with dynamic=False), not kept static like a module's int,
    whose guard torch marks with a HINT about nn.Module."""
    [plain] = tr.parse_reason("0/4: meta.max_q == 1  # return x * model.n * meta.max_q  # mp/deco/n.py:11 in f")
    assert (plain.cause, plain.source) == (tr.INT_ARG, "meta.max_q")
    [module] = tr.parse_reason(
        "0/0: model.n == 0  # return x * model.n * meta.max_q  # mp/deco/n.py:11 in f (HINT: torch.compile considers "
        "integer attributes of the nn.Module to be static. If you are observing recompilation, you might want to make "
        "this integer dynamic using torch._dynamo.config.allow_unspec_int_on_nn_module = True, or convert this integer into a tensor.)"
    )
    assert (module.cause, module.source) == (tr.MODULE_INT_ATTR, "model.n")
    [own] = tr.parse_reason("0/1: self.calls == 3")
    assert own.cause == tr.MODULE_INT_ATTR


# -- fixtures carry no machine paths ----------------------------------------------


def test_fixtures_carry_placeholders_not_machine_paths():
    for path in sorted(FIXTURES.glob("*.log")):
        text = path.read_text(encoding="utf-8")
        # library_fn: a compiled torch function; alias_fields, vmap_zeros_field:
        # torch's vmap wrapper of a user function: their traces name no user file
        assert "@SCRIPTS@" in text or path.stem in ("library_fn", "alias_fields", "vmap_zeros_field"), path.name
        # no absolute path of any machine: every file name in a record is a placeholder
        for m in re.finditer(r'"(/[^"]*)"|File \\"(/[^\\]*)', text):
            raise AssertionError(f"{path.name}: absolute path {m.group(0)[:80]}")
        assert "/work/" not in text and "/home/" not in text and "/tmp/" not in text, path.name


def test_placeholders_are_filled_with_this_checkout():
    text = fixture_text("anneal_float")
    assert "@SCRIPTS@" not in text and "@SITE@" not in text
    entry = fixture("anneal_float").entries[0]
    assert Path(entry.filename) == SCRIPTS / "anneal_float.py"
    assert Path(entry.filename).is_file()


def test_placeholder_round_trip(tmp_path):
    from trace_fixtures import trim

    scripts = str(tmp_path / "repo" / "tests" / "trace_scripts")
    site = trim._site()
    template = (
        '{"str": ["%s/torch/_dynamo/convert_frame.py", 0]}\n'
        '{"compilation_metrics": {"co_filename": "%s/a.py", "recompile_reason":'
        ' "0/0: n == 1  # return x + n  # %s/a.py:3 in f\\nUser stack trace:\\n  File \\"%s/a.py\\", line 3"}}\n'
    )
    raw = template % (site, scripts, trim._short(scripts), scripts)
    stored = trim.to_placeholders(raw, scripts)
    assert str(tmp_path) not in stored and site not in stored
    assert "@SITE@/torch/_dynamo/convert_frame.py" in stored
    assert '"co_filename": "@SCRIPTS@/a.py"' in stored
    # torch's short file name in the guard comment no longer says where it ran
    assert "# tests/trace_scripts/a.py:3 in f" in stored
    assert trim.fill(stored, scripts) == template % (site, scripts, "tests/trace_scripts", scripts)


def test_freed_object_invalidation():
    """A compiled optimizer method reaching ``p.grad`` through ``self.state``:
    ``zero_grad()`` frees the grad and every step's cache entry is thrown
    away (Koratahiu/Advanced_Optimizers#6).  Each recompile_reason names only
    the first cache entry's failure (``not self.state``); the invalidations
    are read from the recompile_reasons artifacts, one reason per compile,
    and rank first with the cure that works (measured: 8 -> 2 graphs with
    ``zero_grad(set_to_none=False)``)."""
    trace = fixture("freed_grad")
    [entry] = [e for e in trace.entries if e.name == "_step_parameter"]
    assert entry.graphs == 8 and entry.limit_hit
    # the first cache entry's own failure (`not self.state`) is truthiness; in
    # the compiles whose other entries were invalidated it is stale: the
    # invalidation is their cause
    assert entry.causes == [tr.INVALIDATED, tr.TRUTH]
    assert sum(1 for r in entry.reasons if r.cause == tr.TRUTH and r.stale) == 7 and entry.count(tr.TRUTH) == 1
    assert tr.cure_label(entry, tr.TRUTH, CODES) == "bounded (1 recompile): the limit came from cache invalidated `list(dict.keys(self.state))[0].grad`"
    assert sum(1 for r in entry.reasons if r.cause == tr.INVALIDATED) == 7  # compiles 2..8
    assert entry.sources(tr.INVALIDATED) == ["list(dict.keys(self.state))[0].grad"]
    label = tr.cure_label(entry, tr.INVALIDATED, CODES)
    assert "is freed between calls" in label and "zero_grad(set_to_none=False)" in label


def test_invalidations_come_from_artifacts_only_when_present():
    """A trace with no invalidation keeps its reasons as recorded."""
    for name in ("module_counter", "anneal_float", "growing_inputs"):
        for e in fixture(name).entries:
            assert all(r.cause != tr.INVALIDATED for r in e.reasons), name


def test_computed_guards_are_specialised_values():
    """A guard on a value computed from one float (``(1.0 - p) == 0.9``) means
    an op needed it as a Python number: torch specialised it."""
    [computed] = tr.parse_reason("0/0: (1.0 + ((-1)*self._modules['drop_path'].drop_prob)) == 0.99")
    [plain] = tr.parse_reason("0/0: self.scale == 0.5")
    [shape] = tr.parse_reason("0/0: x.size()[1] == y.size()[1]")
    [converted] = tr.parse_reason("0/0: int(L['n']) == 3")
    assert computed.specialized and not plain.specialized and not shape.specialized and not converted.specialized


def test_per_block_float_attribute_that_reaches_an_op_needing_a_number():
    """Regional compilation of blocks that each hold their own drop-path rate
    (timm's DropPath(dpr[i])): the rate reaches ``bernoulli_(1 - p)``, torch
    guards the computed value, and each block's rate is a new graph of the
    one Block.forward: 8 graphs and the limit (the model compiled whole: 1
    graph; recompile_limit = 16: 12 graphs, no fallback).  The cause is the
    module's float attribute, not a float argument (it said "float argument
    `(1.0 + ((-1)*self.drop_path.drop_prob))`", cure FR003, FR001: neither
    applies), and the cure says a tensor cannot stand in.  The one
    requires_grad recompile beside it (the first block's input needs no
    grad) is bounded and not what filled the cache."""
    trace = fixture("per_block_drop_path")
    [entry] = [e for e in trace.entries if e.name == "forward"]
    assert entry.graphs == 8 and entry.limit_hit
    assert entry.causes == [tr.MODULE_FLOAT_ATTR, tr.REQUIRES_GRAD]
    assert entry.sources(tr.MODULE_FLOAT_ATTR) == ["self.drop_path.drop_prob"]
    label = tr.cure_label(entry, tr.MODULE_FLOAT_ATTR, CODES)
    assert "needs a Python number" in label and "compile the model whole" in label and "recompile_limit" in label
    assert "FR003" not in label and "fill_" not in label
    # the count's wording follows the release's records (2.14 and 2.9: "1 distinct guard failure")
    assert re.fullmatch(r"bounded \(1 (recompile|distinct guard failure)\): the limit came from module float attribute `self\.drop_path\.drop_prob`", tr.cure_label(entry, tr.REQUIRES_GRAD, CODES))


def test_a_specialised_float_argument_gets_no_dynamic_shapes_cure():
    """``(1.0 - p) == 0.9``: the argument reached an op that needs a Python
    number; ``dynamic=`` cannot lift that (no FR001), and the trace gives FR003
    no evidence to wrap it (a tensor passed in is not shown to cure it)."""
    from codemods.trace.guide import float_evidence

    reasons = tr.parse_reason("0/0: (1.0 - L['p']) == 0.9") + tr.parse_reason("0/1: (1.0 - L['p']) == 0.8")
    entry = tr.CodeEntry("f", str(SCRIPTS / "anneal_float.py"), 3, graphs=3, reasons=reasons)
    label = tr.cure_label(entry, tr.FLOAT_ARG, CODES)
    assert "FR001" not in label and "needs a Python number" in label and label.startswith("FR003")
    assert float_evidence(tr.Trace(entries=[entry])) == {}
    plain = tr.CodeEntry("f", str(SCRIPTS / "anneal_float.py"), 3, graphs=3, reasons=tr.parse_reason("0/0: L['p'] == 0.9"))
    assert "FR001" in tr.cure_label(plain, tr.FLOAT_ARG, CODES)
    [seen] = float_evidence(tr.Trace(entries=[plain])).values()
    assert seen.float_args == {3: frozenset({"p"})}


def test_param_group_step_counter_and_first_step_state_are_bounded():
    """timm's Lamb before 29993ffc kept ``group['step']`` a Python int under a
    compiled ``opt.step``: one recompile when it changes, then automatic
    dynamic; the state dict, empty on the first step, fails its truthiness
    guard once.  3 graphs, no limit.  It read "optimizer hyperparameter",
    cure FR004 (the float-lr rule), and the state guard read "other"."""
    trace = fixture("param_group_step")
    [entry] = trace.entries
    assert entry.graphs == 3 and not entry.limit_hit
    assert sorted(entry.causes) == sorted([tr.INT_ARG, tr.TRUTH])  # 2.9 records the two guards in the other order
    assert entry.sources(tr.INT_ARG) == ["args[0].param_groups[0]['step']"]
    label = tr.cure_label(entry, tr.INT_ARG, CODES)
    assert "FR004" not in label and "bounded in this run (1 recompile, then automatic dynamic" in label
    assert not any(r.specialized for r in entry.reasons)  # a plain access, not a computed value
    # 2.9 lists the state's guard in both recompiles' reasons: "2 recompiles"
    assert re.fullmatch(r"bounded, no fix needed \((1 recompile|2 recompiles): one graph per truth value\)", tr.cure_label(entry, tr.TRUTH, CODES))


def test_a_keyword_tensor_gets_mark_dynamic_advice_by_its_keyword():
    """Blocks compiled one by one take ``cu_doc_lens`` through ``**kwargs``
    (OLMo-core before #504): the guard names ``kwargs['cu_doc_lens']``, no
    name of the caller's; the advice names the tensor by its keyword, and
    says the one recompile is bounded."""
    trace = fixture("kwargs_shape")
    [entry] = trace.entries
    assert entry.graphs == 2 and entry.causes == [tr.TENSOR_SHAPE]
    label = tr.cure_label(entry, tr.TENSOR_SHAPE, CODES)
    assert "torch._dynamo.maybe_mark_dynamic(<the tensor passed as cu_doc_lens>, 0)" in label
    assert "bounded in this run" in label


def test_run_table_names_the_rules_that_matched_and_those_that_found_nothing():
    """After the analysis (``run``) the cure names the rules whose findings
    match the recompile; the rules of its cause that found nothing there are
    said to have found nothing (a survey read "FR001, FR007" as the cure of a
    shape change where the code had no dynamic=False and no DataLoader)."""
    trace = fixture("kwargs_shape")
    [entry] = trace.entries
    [row] = tr.table_rows(trace, CODES, found={})
    assert row[5].endswith("; FR001, FR007 found nothing here") and "maybe_mark_dynamic" in row[5]
    [row] = tr.table_rows(trace, CODES, found={(id(entry), tr.TENSOR_SHAPE): {"FR001"}})
    assert row[5].startswith("FR001, ") and row[5].endswith("; FR007 found nothing here")
    [row] = tr.table_rows(trace, CODES)  # no analysis: every rule of the cause
    assert row[5].startswith("FR001, FR007, ")


def test_a_raised_recompile_limit_is_read_and_told():
    """The compilation_metrics record the limit a compile ran under: a program
    that raised it (timm.optim sets cache_size_limit = 1_000_000 at import)
    never shows "limit hit", so the run says what the limit was."""
    trace = fixture("raised_limit")
    [entry] = trace.entries
    assert entry.graphs == 12 and not entry.limit_hit
    assert trace.recompile_limit == 1_000_000
    assert "recompile limit in this run was 1,000,000" in tr.limit_notice(trace)
    assert fixture("anneal_float").recompile_limit in (None, 8) and tr.limit_notice(fixture("anneal_float")) is None
    assert tr._recompile_limit('{"cache_size_limit": 64, "accumulated_cache_size_limit": 256}') == 64
    assert tr._recompile_limit('{"recompile_limit": 8}') == 8 and tr._recompile_limit(None) is None


def test_an_unproven_float_finding_is_implicated_only_for_its_own_value():
    """pytorch#171320's kernel, ``compiled_step(p, a, b)``, recompiles on
    ``a``; ``b`` never changes.  FR003's --unproven finding on ``b`` is not
    implicated by the trace (it was listed under the trace's findings); a
    proven one, or a source the finding cannot be compared with, is."""
    from codemods.findings import Finding
    from codemods.trace.match import _about_guarded

    entry = tr.CodeEntry("compiled_step", "s.py", 11, graphs=2, reasons=tr.parse_reason("0/0: L['a'] == 0.01"))

    def finding(about, proven):
        return Finding("FR003", "m", "s.py", 20, 1, 20, 2, about=about, proven=proven)

    assert _about_guarded(finding(("a",), False), entry, tr.FLOAT_ARG)
    assert not _about_guarded(finding(("b",), False), entry, tr.FLOAT_ARG)
    assert _about_guarded(finding(("b",), True), entry, tr.FLOAT_ARG)  # the source proved it
    positional = tr.CodeEntry("f", "s.py", 11, graphs=2, reasons=tr.parse_reason("0/0: args[1] == 0.5"))
    assert _about_guarded(finding(("b",), False), positional, tr.FLOAT_ARG)
    keyword = tr.CodeEntry("f", "s.py", 11, graphs=2, reasons=tr.parse_reason("0/0: kwargs['temperature'] == 0.5"))
    assert _about_guarded(finding(("temperature",), False), keyword, tr.FLOAT_ARG)
    assert not _about_guarded(finding(("top_p",), False), keyword, tr.FLOAT_ARG)


def test_every_cache_entry_failure_is_read_from_the_artifacts():
    """One compiled forward shared by every instance of a norm class
    (unsloth-zoo#1003): each recompile_reason names one entry's failure, a
    rank mismatch; the recompile_reasons artifacts list every entry's, and
    each (cause, source) counts once per compile, so the table shows all
    three axes of the cache: the input's rank, the per-instance bool, the
    size (it showed "tensor rank `x`" alone)."""
    trace = fixture("shared_forward_axes")
    [entry] = trace.entries
    assert entry.graphs == 8 and entry.limit_hit
    # the size took 5 values, rank and the bool 2 each: the size leads,
    # though rank failed in more compiles (the entries of the other rank
    # fail on it whatever else changed)
    assert entry.causes == [tr.TENSOR_SHAPE, tr.RANK, tr.CONSTANT]
    assert entry.sources(tr.CONSTANT) == ["self.with_scale"]
    assert entry.count(tr.RANK) == 8 and entry.count(tr.CONSTANT) == 7 and entry.count(tr.TENSOR_SHAPE) == 5
    assert tr.cure_label(entry, tr.CONSTANT, CODES) == "bounded (2 distinct guard failures): the limit came from tensor shape `x`"
    assert tr.cure_label(entry, tr.RANK, CODES) == "bounded (2 distinct guard failures): the limit came from tensor shape `x`"


def test_a_submodule_of_a_module_list_is_named_whole():
    """peft #2177 (benchmarks/recall/peft_hotswap_scaling_tensor): the guard on a
    LoRA scaling of the first layer named `self.layers` and read as a value an op
    needed (`.0` broke the access), so the cure said a tensor cannot stand in;
    the project's fix is a 0-d tensor .fill_()ed by the hot-swap."""
    guard = "self._modules['layers']._modules['0']._modules['q_proj'].scaling['default'] == 1.0"
    cause, source, _dims, computed = tr.classify(guard)
    assert (cause, source) == (tr.MODULE_FLOAT_ATTR, "self.layers[0].q_proj.scaling['default']")
    assert not computed
    [reason] = tr.parse_reason(f"0/0: {guard}  # result = result + lora_B(lora_A(dropout(x))) * scaling  # before.py:63 in forward")
    assert not reason.specialized


def test_an_entry_reached_by_key_position_is_its_own_cause():
    """Advanced_Optimizers' Prodigy_adv (PR #6): `state = self.state[p]` in
    the compiled per-parameter update; torch guards the entry's int by the
    key's place among the keys. Not a module int attribute (FR005 cannot
    cure it): the cause FR017 declares, with its report."""
    guard = "self.state[list(dict.keys(self.state))[1]]['step'] == 0"
    cause, source, _dims, _computed = tr.classify(guard)
    assert (cause, source) == (tr.KEYED_ENTRY, "self.state[list(dict.keys(self.state))[1]]['step']")
    from codemods.transforms import BY_CODE

    # FR017 cures the keyed entry wherever it is; a length or truth only of the dict it found (`about`)
    assert [(c.cause, c.about) for c in BY_CODE["FR017"].cures] == [(tr.KEYED_ENTRY, False), (tr.LENGTH, True), (tr.TRUTH, True)]


def test_sources_per_key_are_shown_once_whole():
    """A guard per key or per layer names one source each: the table shows
    the first whole, with how many more and the indexes that vary (the
    Prodigy_adv trace listed eight `self.state[...][i]['step']` twice in one row)."""
    keyed = [f"self.state[list(dict.keys(self.state))[{i}]]['step']" for i in range(8)]
    shown = tr.shown_sources([*keyed, "self.scale"])
    assert shown == "`self.state[list(dict.keys(self.state))[0]]['step']` and 7 more like it (indexes 0-7), `self.scale`"
    # two of a kind stay listed; only the varying index is counted
    assert tr.shown_sources(["self.layers[0].a", "self.layers[1].a"]) == "`self.layers[0].a`, `self.layers[1].a`"
    assert tr.shown_sources(["x[2][0]", "x[2][1]", "x[2][3]"]) == "`x[2][0]` and 2 more like it (indexes 0-1, 3)"


def test_fr017_cures_the_length_of_its_own_dict_only(tmp_path):
    """FR017 cures a length or truth guard only on the dict its finding looked
    up by a tensor (`self.state`, filled lazily inside the compiled update):
    a length guard on another source of the same function is not its to cure."""
    from codemods.analysis.context import FileContext, Settings
    from codemods.analysis.project import parse_for_index
    from codemods.pipeline.engine import process_source
    from codemods.trace.match import match_file

    path = tmp_path / "tensor_keyed_lazy_state.py"
    data = (SCRIPTS / "tensor_keyed_lazy_state.py").read_bytes()
    path.write_bytes(data)
    result = process_source(str(path), path.name, data, Settings(), render_fixes=False)
    findings = [f for f in result.findings if f.code == "FR017"]
    assert len(findings) == 1 and findings[0].about == ("self.state",)
    _, source = parse_for_index(data, str(path))
    ctx = FileContext(str(path), path.name, Settings(), None, source)

    def entry(cause: str, guarded: str) -> tr.CodeEntry:
        reason = tr.Reason(cause, guarded, f"len({guarded}) == 1" if cause == tr.LENGTH else f"not {guarded}")
        return tr.CodeEntry(name="__update", filename=str(path), firstlineno=11, graphs=3, compiles=3, recompiles=2, reasons=[reason])

    for cause in (tr.LENGTH, tr.TRUTH):
        matches, _ = match_file(ctx, findings, [entry(cause, "self.state")])
        assert [(m.finding.code, m.cause) for m in matches] == [("FR017", cause)]
        matches, others = match_file(ctx, findings, [entry(cause, "self.hist")])
        assert matches == [] and others == findings


def test_run_makes_a_tested_int_attribute_dynamic_from_the_first_compile(tmp_path):
    """int_attr_membership under ``run --fix``: the table names the test and
    its line; ``self.layer_idx`` goes into ``dynamic_sources``, so no graph
    is specialised to layer 0: 3 -> 2 graphs (one per outcome of the test),
    the same result, kept."""
    from test_trace import graphs, results, run_cli

    proc, script = run_cli(tmp_path, "int_attr_membership", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "each outcome of the test (`not (self.layer_idx == 0 or self.layer_idx == 5)` at int_attr_membership.py:26)" in out
    assert "not (self.layer_idx`" not in out  # no source cut at `==`
    assert graphs(out, "total") == (3, 2) and "restored" not in out
    first, *after = results(out)
    assert after and all(r == first for r in after)
    assert script.read_text().count("torch.compiler.config.dynamic_sources += \"L['self'].layer_idx,\"\n") == 1


def test_an_nn_module_int_attribute_tested_gets_the_flag_then_dynamic_sources(tmp_path):
    """The same test on an nn.Module's int attribute: specialised at every
    block (8 graphs, the limit); FR005's flag (from the trace) makes it
    dynamic after one recompile (3), and the next round names it in
    ``dynamic_sources`` (2): both kept, the same result."""
    from test_trace import results, run_cli

    proc, script = run_cli(tmp_path, "int_attr_module", "--fix")
    out = proc.stdout
    assert proc.returncode == 0, out
    assert "8 -> 3" in out and "3 -> 2" in out and "Over 2 rounds: 8 -> 2 graphs." in out, out
    first, *after = results(out)
    assert after and all(r == first for r in after)
    text = script.read_text()
    assert "torch._dynamo.config.allow_unspec_int_on_nn_module = True" in text
    assert "torch.compiler.config.dynamic_sources += \"L['self'].layer_idx,\"" in text


def test_a_str_argument_is_bounded_only_if_it_takes_few_values():
    """nari-labs/dia before 5f57172d: the prompt text is an argument of the
    compiled `_prepare_generation`; each prompt is a graph."""
    def entry_of(*texts):
        reasons = [r for t in texts for r in tr.parse_reason(t)]
        return tr.CodeEntry(name="f", filename="/w/a.py", firstlineno=1, graphs=len(texts) + 1, recompiles=len(texts), reasons=reasons)

    prompts = entry_of("0/0: text == '[S1] Dia is an open weights model.'", "0/1: text == \"[S1] Wow. Amazing.\"")
    label = tr.cure_label(prompts, tr.CONSTANT, [])
    assert label.startswith("bounded only if `text` takes few values: each new string is a graph (2 recompiles so far); if it carries data")
    # an attribute's string (no argument of the caller's): bounded as before
    attribute = entry_of("0/0: self.mode == 'fast'")
    assert [r.cause for r in attribute.reasons] == [tr.CONSTANT]
    assert tr.cure_label(attribute, tr.CONSTANT, []) == "bounded, no fix needed (1 recompile: one graph per value)"


def test_a_self_container_empty_at_some_calls_names_the_cure():
    """xDiT before PR #781: `self._usp_attention_kwargs` gets three keys by
    `update()` when the sequence needs padding and loses them by `pop()`
    otherwise; its truthiness guard fails once.  Not "no fix needed": the
    project kept the key set fixed (every key present, None when unused)."""
    [reason] = tr.parse_reason("0/0: not self._usp_attention_kwargs")
    assert reason.cause == tr.TRUTH
    entry = tr.CodeEntry(name="forward", filename="m.py", firstlineno=1, graphs=2, compiles=2, recompiles=1, reasons=[reason])
    label = tr.cure_label(entry, tr.TRUTH, CODES)
    assert label.startswith("report: `self._usp_attention_kwargs` is empty at some calls and not at others (1 recompile")
    assert "every key present, None when unused" in label
    # an optimizer's state, empty before its first step, stays bounded
    [state] = tr.parse_reason("0/0: not self.state")
    entry = tr.CodeEntry(name="step", filename="m.py", firstlineno=1, graphs=2, compiles=2, recompiles=1, reasons=[state])
    assert tr.cure_label(entry, tr.TRUTH, CODES).startswith("bounded, no fix needed (1 recompile: one graph per truth value")


def test_state_unset_at_one_compiled_call_names_the_cure_not_bounded():
    """vllm-gaudi 86bb66e7 (a module global op made on first use inside the
    compiled attention: `G['_CACHED_FSDPA_OP'] is None`) and vllm-ascend
    cc9fa548 (`running_in_graph` first assigned by the compiled forward and
    read through hasattr): both projects set the state up before the first
    compiled call; the table says so instead of "bounded, no fix needed".
    An argument None at some calls (LTX-2 63fd9a4f: the perturbation mask of
    one block of those compiled one by one) is reported with the projects'
    cure, a value at every call; a gradient's None and an optimizer's state
    stay bounded."""

    def label(text, available=()):
        [reason] = tr.parse_reason(text)
        entry = tr.CodeEntry(name="forward", filename="m.py", firstlineno=1, graphs=2, compiles=2, recompiles=1, reasons=[reason])
        return tr.cure_label(entry, reason.cause, list(available), matched=bool(available))

    gaudi = label("0/0: G['_CACHED_FSDPA_OP'] is None")
    assert gaudi.startswith("report: `_CACHED_FSDPA_OP` is None at one compiled call and set by the next (1 recompile): set it up before the first compiled call")
    ascend = label("0/0: not hasattr(self._modules['layers']._modules['0']._modules['mla_attn'].impl, 'running_in_graph')")
    assert ascend.startswith("report: `self.layers[0].mla_attn.impl.running_in_graph` is missing at one compiled call and present at the next")
    for bounded in ("0/0: L['p'].grad is None", "0/0: self._modules['w'].grad is None", "0/0: hasattr(L['x'], 'foo')"):
        assert label(bounded).startswith("bounded, no fix needed (1 recompile"), bounded
    for optional in ("0/0: L['mask'] is None", "0/0: L['video'].self_attn_perturbation_mask is None"):
        assert label(optional).startswith("report: `") and "is None at some calls and not at others (1 recompile: one graph for each): pass a value at every call" in label(optional), optional
    # a memo FR014 matched: its cure, not the report
    assert not label("0/0: self._freqs_cache is None", ["FR014"]).startswith("report:")


def test_inference_tensors_against_normal_ones_name_the_mode():
    # HabanaAI/vllm-fork #1691: warm-up under inference_mode, the loop under no_grad
    entry = entry_at(fixture("inference_warmup"), "decode", 17)
    assert tr.DISPATCH in entry.causes
    label = tr.cure_label(entry, tr.DISPATCH, CODES)
    # the guard torch checks first is the weight's: a normal tensor whose key
    # set shows differently under inference_mode than under no_grad
    # FR021 (a mode decorator on a coroutine) is the rule that can cure it, where it finds one
    assert label.startswith("FR021, report: `weight` reached the compiled code once under torch.inference_mode() and once outside it")
    assert "run the calls and make their inputs under one mode" in label
    assert label.endswith("a mode decorator on an `async def` does not cover its body: rule FR021)")
    # another dispatch difference stays bounded
    other = tr.CodeEntry(name="f", filename="/p/f.py", firstlineno=3, graphs=2)
    other.reasons.extend(tr.parse_reason("0/0: tensor 'x' dispatch key set mismatch. expected DispatchKeySet(CPU, BackendSelect), actual DispatchKeySet(CPU, BackendSelect, Python)"))
    assert tr.cure_label(other, tr.DISPATCH, CODES).startswith("bounded")


def test_a_callable_made_again_between_calls_is_reported_with_its_cure():
    """OneTrainer 3fced711 (benchmarks/recall/onetrainer_fused_leaf_partial_forward):
    a functools.partial installed as a layer's `forward` anew at every re-hook
    throws the compiled block away each time: not "bounded", a report naming
    the cure (make it once, or a bound method of a fixed function); a
    gradient freed by zero_grad keeps its own remedy."""
    text = "Cache line invalidated because self._modules['checkpoint']._modules['attn']._modules['to_q'].forward got deallocated"
    reasons = [tr.Reason(tr.INVALIDATED, "self.checkpoint.attn.to_q.forward", text)] * 4
    entry = tr.CodeEntry("forward", "m.py", 150, graphs=5, reasons=reasons)
    label = tr.cure_label(entry, tr.INVALIDATED, CODES)
    assert label.startswith("report: `self.checkpoint.attn.to_q.forward` is freed and made again between calls (4 recompiles")
    assert "bound method of a fixed function" in label and "bounded" not in label
    grad = [tr.Reason(tr.INVALIDATED, "self.w.grad", "Cache line invalidated because self.w.grad got deallocated")] * 2
    assert tr.cure_label(tr.CodeEntry("step", "m.py", 3, graphs=3, reasons=grad), tr.INVALIDATED, CODES).startswith("bounded, no fix needed")


def test_a_truth_guard_fr014_matched_names_fr014_without_the_report():
    """open_clip's `not self.loss.labels`: where FR014's finding matched it,
    the cure is FR014's, not also the report for a container emptied between
    calls; unmatched, the report stands."""
    entry = tr.CodeEntry("training_forward", "m.py", 10, graphs=2, reasons=[tr.Reason(tr.TRUTH, "self.loss.labels", "not self.loss.labels")])
    matched = tr.cure_label(entry, tr.TRUTH, ["FR014"], matched=True)
    assert matched.startswith("FR014") and "report" not in matched
    assert tr.cure_label(entry, tr.TRUTH, ["FR014"]).startswith("report: `self.loss.labels` is empty at some calls")
