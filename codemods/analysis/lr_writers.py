"""FR004's facts across modules: which lr writers of one module may write
``.fill_`` because every optimizer passed to them, from any module of the
run, gets a tensor lr; and which optimizer factories of one module (nanoGPT's
``GPT.configure_optimizers``) may build a tensor lr because every module
that gets an optimizer from them writes its lr with ``.fill_``.

The rule declares them (:data:`codemods.transforms.optimizer_scalars.LR_WRITERS`,
a :class:`~codemods.analysis.project.ProjectFact`); each file's facts come
from the rule's own look at it (``index_facts``: the module's lr writers, and
the optimizers it passes to code of other modules, its factories, and the
optimizers it gets from factories of other modules); this module proves them
over the run.  Index tables: ``lr_writers`` ((root, module) -> {writer:
{"fills": whether it writes a float it would fill}}, proven or not: an
optimizer passed to one has an lr that changes), ``lr_tensorizers`` ((root,
module) -> {function: {"param", "index"}}: it makes an lr a tensor),
``lr_steppers`` ((root, module) -> {function: {"param", "index", "field",
"clean", "compiled" (the first lines of the module's compiled functions)}}: it steps the optimizer it gets, or that the field of what it gets
holds, inside a compiled region),
``lr_proven`` ((root, module) -> {writer: its callers as (module, line of
the optimizer)}), ``lr_aware`` ((root, module) -> {writer: True}: proven
for tensor-aware writes, some of its optimizers keeping a float lr),
``lr_unsafe`` (the same, for the proven writers whose
``.fill_`` holds only with --unsafe-fixes: the callers whose optimizer gets
its tensor lr from an unsafe fix), ``lr_ready`` (the same, for the callers
whose optimizer has a tensor lr already: their files need no fix, and a
trace's recompile of their step is the writer's to cure) and ``lr_factories`` ((root, module) -> {class or function:
{method ("" for a function): its users as (module, line of the optimizer)}}).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .project import LATER, ModuleKey, ProjectIndex, _absolute, _resolve_in, module_token


#: how an optimizer gets a tensor lr (:func:`_level`): "tensor" when it has one already
LEVELS = ("safe", "unsafe", "", "tensor")


def later(data: bytes) -> bool:
    """Are these the bytes of a file whose FR004 facts wait: they rule a
    compile site out (:func:`codemods.analysis.mentions.mentions_compile`)
    but the file mentions ``optim`` (it may write ``param_groups``, return
    an optimizer, or build one and hand it to a training loop)?  Its facts
    matter only to a file that passes an optimizer to it or gets one from
    it, and, when some module steps an optimizer it is given, to that one:
    the file may hand it one (:func:`wanted`)."""
    from .mentions import mentions_compile

    return b"optim" in data and not mentions_compile(data)


def wanted(found: Dict[str, Optional[object]], key_of: Callable[[str], ModuleKey]) -> set:
    """The dotted modules a call passing an optimizer, in any file of the
    run, can resolve to: the only modules whose waiting files' lr writers
    can matter."""
    callers: Dict[str, ModuleKey] = {}
    out = set()
    if any(isinstance(facts, dict) and facts.get("steppers") for facts in found.values()):
        # a module that steps an optimizer it is given, compiled: any waiting
        # file may build one and hand it over (open_clip's main.py), so all
        # are read
        out |= {key_of(path)[1] for path, facts in found.items() if facts == LATER}
    for path, facts in found.items():
        optimizers = (facts.get("passes") or {}).get("optimizers") if isinstance(facts, dict) else None
        uses = facts.get("factory_uses") if isinstance(facts, dict) else None
        if optimizers or uses:
            callers[path] = key_of(path)
        for opt in optimizers or ():
            for call in opt["calls"]:
                target = _absolute(callers, path, call[0])
                if target is not None:
                    out.add(target[1])
        for use in uses or ():
            target = _absolute(callers, path, use["q"])
            if target is not None:
                out.add(target[1])
    return out


def hands_over(entry: dict, slot, field: str) -> bool:
    """Does a call that hands an optimizer over at ``slot`` (a position, or
    a keyword), in ``field`` of what it passes there ("" for the optimizer
    itself), give it to the parameter of the index entry ``entry`` (a
    stepper: {"param", "index", "field"}) that entry steps?"""
    return field == entry["field"] and (slot == entry["index"] if isinstance(slot, int) else slot == entry["param"])


def files_of(index: ProjectIndex, modules) -> Tuple[str, ...]:
    """The files of the run that are the dotted modules ``modules`` (the
    tables name an lr writer's callers by module and line)."""
    wanted = set(modules)
    return tuple(sorted(path for path, key in index.modules.items() if key[1] in wanted))


def valid(lr) -> bool:
    """Has ``lr`` (FR004's facts of one file, maybe read from the cache
    folder) the shape :func:`prove` reads?  A damaged entry is a
    miss, never a crash."""
    try:
        if not isinstance(lr, dict) or not isinstance(lr.get("writers", {}), dict) or not isinstance(lr.get("passes", {}), dict):
            return False
        for entry in lr.get("writers", {}).values():
            if not (isinstance(entry["param"], str) and isinstance(entry["index"], int) and isinstance(entry["clean"], bool) and isinstance(entry.get("uniform", False), bool)):
                return False
            if not all(isinstance(k, str) and isinstance(i, int) for k, i in entry["keys"]) or not all(isinstance(n, int) for n in entry["lines"]):
                return False
            if not all(isinstance(v, str) for v in entry.get("via", ())) or not isinstance(entry.get("alone", False), bool):
                return False
        for entry in lr.get("steppers", {}).values():
            if not (isinstance(entry["param"], str) and isinstance(entry["index"], int) and isinstance(entry["field"], str) and isinstance(entry["clean"], bool)
                    and all(isinstance(n, int) for n in entry["compiled"])):
                return False
        for entry in lr.get("tensorizers", {}).values():
            if not (isinstance(entry["param"], str) and isinstance(entry["index"], int)):
                return False
        for methods in lr.get("factories", {}).values():
            for entry in methods.values():
                param = entry["lr_param"]
                if not (isinstance(entry["line"], int) and isinstance(entry["fixable"], bool) and (param is None or (isinstance(param[0], str) and isinstance(param[1], int)))):
                    return False
        for use in lr.get("factory_uses", ()):
            if not (isinstance(use["q"], str) and isinstance(use["method"], str) and isinstance(use["line"], int) and isinstance(use["stepped"], bool)
                    and isinstance(use["fills"], bool) and isinstance(use["complete"], bool) and isinstance(use["star"], bool) and all(isinstance(k, str) for k in use["args"])
                    and all(isinstance(k, str) and isinstance(v, str) for k, v in use["kwargs"].items())):
                return False
        passes = lr.get("passes", {})
        if not isinstance(passes.get("complete", {}), dict):
            return False
        for opt in passes.get("optimizers", ()):
            if not (isinstance(opt["line"], int) and opt["fixed"] in LEVELS and isinstance(opt.get("if_stepped", False), bool) and isinstance(opt.get("shared", False), bool)):
                return False
            for q, slot, field in opt.get("handoffs", ()):
                if not (isinstance(q, str) and isinstance(slot, (int, str)) and isinstance(field, str)):
                    return False
            for q, slot, nargs, kws, star, line in opt["calls"]:
                if not (isinstance(q, str) and isinstance(slot, (int, str, type(None))) and isinstance(nargs, int) and isinstance(kws, list) and isinstance(star, bool)):
                    return False
        return True
    except (KeyError, TypeError, ValueError, AttributeError):
        return False


def prove(index: ProjectIndex, files: Sequence[str], lr: Dict[str, Optional[dict]], read=None) -> None:
    """Fill the index's table ``lr_proven``: an lr writer of one module (a function or
    class whose parameter's ``param_groups`` get ``["lr"] = v``, FR004's
    ``_writers``) is proven when its writes are clean (nothing else of the
    optimizer is used there, no lr read back), it is called from other
    modules only with optimizers that plain --fix makes tensors (or, for a
    proof under --unsafe-fixes only, ``lr_unsafe``, optimizers that
    --unsafe-fixes makes tensors, then handed to other code too; each call
    passes it where the writer expects it, leaves the key's default "lr",
    and is every use of the name in its file), every other optimizer those
    calls pass is handed only to proven writers, and no other file of the
    run mentions the writer (a call the index has not seen).  A writer those
    rules leave out only because some optimizers it is given keep a float
    lr, or files not seen may call it, is proven for a tensor-aware write
    (``lr_aware``) when at least one gets a tensor lr and each write stands
    on a line of its own."""
    _prove_factories(index, files, lr)
    # functions that make an lr a tensor need no proof: an optimizer handed
    # to one has no float lr left to guard on
    tensorizers = {index.modules[path]: dict(facts["tensorizers"]) for path, facts in sorted(lr.items()) if facts and facts.get("tensorizers") and path in index.modules}
    if tensorizers:
        index.tables["lr_tensorizers"] = tensorizers
    # functions that step an optimizer they get inside a compiled region (a
    # training loop or a train-step factory of another module)
    steppers = {index.modules[path]: dict(facts["steppers"]) for path, facts in sorted(lr.items()) if facts and facts.get("steppers") and path in index.modules}
    if steppers:
        index.tables["lr_steppers"] = steppers
    writers: Dict[ModuleKey, Dict[str, dict]] = {}
    for path, facts in lr.items():
        if facts and facts.get("writers") and path in index.modules:
            writers[index.modules[path]] = facts["writers"]
    if not writers:
        return
    index.tables["lr_writers"] = {key: {name: {"fills": bool(found[name]["lines"])} for name in sorted(found)} for key, found in sorted(writers.items())}
    callers: Dict[Tuple[ModuleKey, str], List[Tuple[str, dict]]] = {}
    bad: set = set()
    unsafe: Dict[Tuple[ModuleKey, str], List[Tuple[str, dict]]] = {}
    ready: Dict[Tuple[ModuleKey, str], List[Tuple[str, dict]]] = {}
    # for a tensor-aware write: the callers whose optimizer gets a tensor lr
    # (with its level), and the writers a call rules out whatever the lr
    tensor_callers: Dict[Tuple[ModuleKey, str], List[Tuple[str, dict, str]]] = {}
    unfit: set = set()
    for path, facts in sorted(lr.items()):
        passes = (facts or {}).get("passes") or {}
        complete = passes.get("complete", {})
        for opt in passes.get("optimizers", ()):
            level = _level(index, path, opt, steppers)
            for q, slot, nargs, kws, star, _line in opt["calls"]:
                hit = _resolve_in(index.modules, writers, path, q)
                if hit is None:
                    continue
                (key, entry), name = hit, q.rpartition(".")[2]
                callers.setdefault((key, name), []).append((path, opt))
                passed_key = any(k in kws or 0 <= at < nargs for k, at in entry["keys"])
                # groups sharing one lr tensor need a write that gives each the same value
                shared = opt.get("shared", True) and not entry.get("uniform", False)
                fit = entry["clean"] and complete.get(q) and not star and not passed_key and slot in (entry["param"], entry["index"])
                # an optimizer that loads a saved state may get a float lr
                # back (a checkpoint from before the fix): a tensor-aware write only
                if not (fit and level and not shared and not opt.get("loads")):
                    bad.add((key, name))
                elif level == "unsafe":
                    unsafe.setdefault((key, name), []).append((path, opt))
                if level == "tensor":
                    ready.setdefault((key, name), []).append((path, opt))
                if not fit or (level and shared):
                    unfit.add((key, name))
                elif level:
                    tensor_callers.setdefault((key, name), []).append((path, opt, level))
    proven = {w for w in callers if w not in bad}
    if proven:  # a file that mentions a writer and was not seen calling it
        proven -= _mentioned_unseen(index, files, {w: (w[1], {p for p, _ in callers[w]}) for w in proven})
    # writers that share writes (open_clip's `cosine_lr` and `const_lr`, whose
    # closures both call `assign_learning_rate`): a shared write becomes
    # `.fill_` only when no file of the run reaches it through one not proven
    while True:
        shares = {
            (key, name, other): (other, set())
            for key, name in sorted(proven)
            for other, entry in sorted(writers[key].items())
            if (key, other) not in proven and set(writers[key][name]["lines"]) & set(entry["lines"])
        }
        reached = {(k[0], k[1]) for k in _mentioned_unseen(index, files, shares)} if shares else set()
        if not reached:
            break
        proven -= reached
    changed = True
    while changed:  # every writer an optimizer is passed to must be proven
        changed = False
        for w in sorted(proven):
            for path, opt in callers[w]:
                others = [(h[0], call[0].rpartition(".")[2]) if h is not None else None
                          for h, call in ((_resolve_in(index.modules, writers, path, call[0]), call) for call in opt["calls"])]
                # under --unsafe-fixes only, code that is no lr writer of the
                # run may get the optimizer too (its own finding says so)
                if any((o is None and w not in unsafe) or (o is not None and o not in proven) for o in others):
                    proven.discard(w)
                    changed = True
                    break
                # an optimizer also handed to a writer whose `.fill_` holds
                # only with --unsafe-fixes gets its tensor lr only then
                risky = next((o for o in others if o is not None and o in unsafe), None)
                if risky is not None and w not in unsafe:
                    unsafe[w] = list(unsafe[risky])
                    changed = True
    # a writer some of whose optimizers keep a float lr (open_clip's
    # `cosine_lr` is also given legacy_main's, stepped eagerly): its writes
    # become tensor-aware (`if isinstance(g["lr"], torch.Tensor):
    # g["lr"].fill_(v) else: g["lr"] = v`, the project's own cure), which
    # keeps a float a float, so neither every caller nor every file need be
    # seen; only the optimizers it gets as tensors go with it
    aware = {
        w: found for w, found in sorted(tensor_callers.items())
        if w not in proven and w not in unfit and writers[w[0]][w[1]].get("alone", False)
    }
    for w, found in aware.items():
        risky = [(p, o) for p, o, level in found if level == "unsafe"]
        if risky:
            unsafe[w] = risky
        index.tables.setdefault("lr_aware", {}).setdefault(w[0], {})[w[1]] = True
    table = index.tables.setdefault("lr_proven", {})
    for key, name in sorted(proven | set(aware)):
        found = [(p, o) for p, o, _ in aware[(key, name)]] if (key, name) in aware else callers[(key, name)]
        table.setdefault(key, {})[name] = tuple((index.modules[p][1], opt["line"]) for p, opt in found)
        for table_name, held in (("lr_unsafe", unsafe), ("lr_ready", ready)):
            if held.get((key, name)):
                index.tables.setdefault(table_name, {}).setdefault(key, {})[name] = tuple((index.modules[p][1], opt["line"]) for p, opt in held[(key, name)])
    index.always = tuple(sorted(set(index.always) | {p for p in map(index.path_of, table) if p is not None}))


def _level(index: ProjectIndex, path: str, opt: dict, steppers: Dict[ModuleKey, Dict[str, dict]]) -> str:
    """How the optimizer ``opt`` of ``path`` (:meth:`_passes_out`'s record)
    gets a tensor lr: "safe" (plain --fix), "unsafe" (only with
    --unsafe-fixes), "tensor" (it has one already) or "" (not at all).  One stepped nowhere in its module
    gets a tensor lr, with --unsafe-fixes, when its module would fix it were
    it stepped elsewhere ("if_stepped") and it is handed to a function of
    another module that steps it compiled."""
    if opt["fixed"] or not opt.get("if_stepped"):
        return opt["fixed"]
    for q, slot, field in opt.get("handoffs", ()):
        hit = _resolve_in(index.modules, steppers, path, q)
        if hit is not None and hands_over(hit[1], slot, field):
            # the module's own run calls the fix safe only when nothing but
            # that one call gets the optimizer: not proven here, so unsafe
            return "unsafe"
    return ""


def _prove_factories(index: ProjectIndex, files: Sequence[str], lr: Dict[str, Optional[dict]]) -> None:
    """Fill the index's table ``lr_factories``: a factory of one module (a
    function, or a method of a class, that returns one optimizer built
    there, whose lr FR004 would make a tensor) is proven when some module
    steps an optimizer it builds inside a compiled region, every module
    that gets one from it writes that optimizer's lr only as a float that
    becomes ``.fill_``, reads no lr back and makes no call of the factory
    the index cannot follow, each passes a float for the
    factory's lr parameter, and no other file of the run mentions the
    factory (a use the index has not seen)."""
    factories: Dict[ModuleKey, Dict[str, Dict[str, dict]]] = {}
    for path, facts in lr.items():
        if facts and facts.get("factories") and path in index.modules:
            factories[index.modules[path]] = facts["factories"]
    if not factories:
        return
    uses: Dict[Tuple[ModuleKey, str, str], List[Tuple[str, dict]]] = {}
    for path, facts in sorted(lr.items()):
        for use in (facts or {}).get("factory_uses", ()):
            hit = _resolve_in(index.modules, factories, path, use["q"])
            if hit is not None and use["method"] in hit[1]:
                uses.setdefault((hit[0], use["q"].rpartition(".")[2], use["method"]), []).append((path, use))
    proven: Dict[Tuple[ModuleKey, str, str], List[Tuple[str, dict]]] = {}
    for (key, name, method), found in sorted(uses.items()):
        entry = factories[key][name][method]
        if entry["fixable"] and any(u["stepped"] for _, u in found) and all(u["fills"] and u["complete"] and _passes_float(u, entry["lr_param"]) for _, u in found):
            proven[(key, name, method)] = found
    if not proven:
        return
    # a file that mentions a factory (its method's or function's name) and was not seen using it
    for f in _mentioned_unseen(index, files, {f: (f[2] or f[1], {p for p, _ in found}) for f, found in proven.items()}):
        proven.pop(f)
    table = index.tables.setdefault("lr_factories", {})
    for (key, name, method), found in sorted(proven.items()):
        stepped = [(p, u) for p, u in found if u["stepped"]]
        table.setdefault(key, {}).setdefault(name, {})[method] = tuple((index.modules[p][1], u["line"]) for p, u in stepped + [x for x in found if x not in stepped])
    index.always = tuple(sorted(set(index.always) | {p for p in map(index.path_of, table) if p is not None}))


def _passes_float(use: dict, param: Optional[list]) -> bool:
    """Does the call ``use`` records pass a float for the factory's lr
    parameter ``param`` ([name, position]; None: the lr is not a parameter)?"""
    if param is None:
        return True
    if use["star"]:
        return False
    name, at = param
    kind = use["kwargs"].get(name) or (use["args"][at] if 0 <= at < len(use["args"]) else None)
    return kind == "float"


def _mentioned_unseen(index: ProjectIndex, files: Sequence[str], names: Dict[tuple, Tuple[str, set]]) -> set:
    """The entries of ``names`` ((module key, ...) -> (the name a use must
    mention, the files whose uses the index saw)) that a file of the run
    other than the entry's own module and those files mentions, together
    with the module's last name (:func:`module_token`), or that a file that
    cannot be read might: a use the index has not seen."""
    from .mentions import mentions_any

    out: set = set()
    for path in files:
        todo = [k for k in names if k not in out and path not in names[k][1] and index.path_of(k[0]) != path]
        if not todo:
            continue
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            data = None
        for k in todo:
            if data is None or mentions_any(data, [module_token(names[k][0], k[0])]):
                out.add(k)
    return out
