"""How the compile model follows compiles and the code they run when they
are reached indirectly (issue 27, form 8): a factory's closure compiled and
stored on a dataclass, modules compiled one by one chosen by class name,
blocks of an nn.ModuleList under an nn.ModuleDict, and the methods of a plain
object handed to the compiled code."""

from __future__ import annotations

import ast

from codemods.analysis.compile_sites import CompileModel
from codemods.analysis.modules import compiled_module_class, counted_object_ints, methods_reached_through_submodules, plain_methods_called
from codemods.analysis.source import Source


def model_of(code: str) -> CompileModel:
    return CompileModel(Source("m.py", "m.py", code.encode(), ast.parse(code), code, "utf-8"))


FACTORY = """import torch
from dataclasses import dataclass
from typing import Callable

def make_step(scale):
    def step(x, alpha):
        return x * scale * alpha
    {other}return step

@dataclass
class Runner:
    fn: Callable

runner = Runner(fn=torch.compile(make_step(2.0)))
for i in range(3):
    runner.fn(torch.ones(3), 0.1 * i)
"""


def test_a_factory_closure_stored_on_a_dataclass_is_followed():
    model = model_of(FACTORY.format(other=""))
    (site,) = model.compile_sites
    assert site.target_def is not None and site.target_def.name == "step"
    assert site.binding == "runner.fn"
    assert [c.lineno for c in site.calls] == [16]


def test_a_factory_that_may_return_another_function_is_not_followed():
    other = "if scale < 0:\n        return abs\n    "
    (site,) = model_of(FACTORY.format(other=other)).compile_sites
    assert site.target_def is None


def test_a_plain_class_field_is_not_taken_for_a_dataclass_field():
    code = FACTORY.format(other="").replace("@dataclass\n", "")
    (site,) = model_of(code).compile_sites
    assert site.binding is None and site.calls == []


BY_NAME = """import torch
import torch.nn as nn

class Block(nn.Module):
    def forward(self, x):
        return x

class Other(nn.Module):
    def forward(self, x):
        return x

model = nn.Sequential(Block(), Other())
for m in model.modules():
    if {test}:
        m.compile()
"""


def test_modules_compiled_by_class_name():
    for test in ('m.__class__.__name__ == "Block"', 'type(m).__name__ in ("Block", "Missing")', 'm.__class__.__name__ == "Nope" or type(m).__name__ == "Block"'):
        model = model_of(BY_NAME.format(test=test))
        (site,) = model.compile_sites
        cls = compiled_module_class(model, site)
        assert cls is not None and cls.name == "Block", test


def test_modules_compiled_by_a_class_list_attribute():
    """diffusers' compile_repeated_blocks: `submod.__class__.__name__ in
    repeated_blocks`, the list read from the model class's `_repeated_blocks`."""
    code = (
        "import torch.nn as nn\n"
        "class Mixin(nn.Module):\n    _repeated_blocks = []\n"
        "    def compile_repeated_blocks(self):\n        repeated_blocks = getattr(self, '_repeated_blocks', None)\n"
        "        for submod in self.modules():\n            if submod.__class__.__name__ in repeated_blocks:\n                submod.compile()\n"
        "class Block(nn.Module):\n    def forward(self, x):\n        return x\n"
        "class Model(Mixin):\n    _repeated_blocks = ['Block']\n"
    )
    model = model_of(code)
    (site,) = model.compile_sites
    assert compiled_module_class(model, site).name == "Block"


KV = """import torch
import torch.nn as nn

class KVCache:
    def __init__(self):
        self.pos = 0
    def get_pos(self):
        return self.pos
    def insert_kv(self, k):
        t0, t1 = self.pos, self.pos + k.size(0)
        self.pos = t1
        return k

class Attn(nn.Module):
    def forward(self, x, kv_cache):
        return kv_cache.insert_kv(x)

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attn()
    def forward(self, x, kv_cache):
        return self.attn(x, kv_cache)

class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict({"h": nn.ModuleList([Block() for _ in range(2)])})
    def forward(self, x, kv_cache=None):
        T0 = kv_cache.get_pos()
        for block in self.transformer.h:
            x = block(x, kv_cache)
        return x[T0:]

model = torch.compile(GPT())
cache = KVCache()
model(torch.ones(3), {passed})
"""


def test_blocks_of_a_module_list_under_a_module_dict_are_reached():
    model = model_of(KV.replace("{passed}", "cache"))
    (site,) = model.compile_sites
    cls = compiled_module_class(model, site)
    reached = [(c.name, n) for c, n, _ in methods_reached_through_submodules(model, cls, "forward")]
    assert ("Block", "forward") in reached and ("Attn", "forward") in reached


def test_methods_of_an_object_handed_as_a_parameter():
    model = model_of(KV.replace("{passed}", "cache"))
    fwd = model.classes["GPT"].body[1]
    assert [(c.name, n, p) for c, n, _, p in plain_methods_called(model, fwd)] == [("KVCache", "get_pos", "kv_cache")]


def test_a_counted_int_needs_the_object_given_to_the_compiled_code():
    given = model_of(KV.replace("{passed}", "cache"))
    (site,) = given.compile_sites
    assert [(c.owner.name, c.attr) for c in counted_object_ints(given, site)] == [("KVCache", "pos")]
    never = model_of(KV.replace("{passed}", "None"))
    (site,) = never.compile_sites
    assert counted_object_ints(never, site) == []


# -- a compiled callable handed to a constructor, stored as self.<attr> ----------------

SOLVERS = """import torch

class Euler:
    def __init__(self, denoiser):
        self.denoiser = denoiser

    def step(self, x, t):
        return self.denoiser(x, t)

class Heun(Euler):
    def step(self, x, t):
        return self.denoiser(x, t) + self.denoiser(x, t * 2)

class Other:
    def __init__(self, denoiser):
        self.fn = denoiser

    def __call__(self, x):
        return self.fn(x)

TABLE = {"euler": Euler, "heun": Heun}

def sample(denoiser, x, name):
    solver_cls = TABLE[name]
    return solver_cls(denoiser).step(x, 1.0)

def make():
    def denoise(x, t):
        return x * t
    return (1, denoise)

_, denoiser = make()
compiled = torch.compile(denoiser)
sample(compiled, torch.ones(2), "heun")
"""


def lines_of(model):
    return [[c.lineno for c in site.calls] for site in model.compile_sites]


def test_a_compiled_callable_reaches_the_attribute_a_constructor_stores():
    # through a table of classes (`TABLE[name](denoiser)`), to each class's
    # __init__ (Heun's inherited from Euler): `self.denoiser(...)` calls it
    assert lines_of(model_of(SOLVERS)) == [[8, 12, 12]]


def test_a_direct_constructor_call_too_and_only_the_class_called():
    code = SOLVERS.replace("return solver_cls(denoiser).step(x, 1.0)", "return Other(denoiser)(x)")
    assert lines_of(model_of(code)) == [[19]]


def test_a_table_holding_anything_but_classes_of_the_module_is_not_followed():
    code = SOLVERS.replace('"heun": Heun}', '"heun": Heun, "f": print}')
    assert lines_of(model_of(code)) == [[]]
    # nor a table bound twice
    code = SOLVERS.replace("def sample(", 'TABLE = {"euler": Other}\n\ndef sample(')
    assert lines_of(model_of(code)) == [[]]


# -- blocks compiled in a loop over a parameter's attribute (musubi-tuner) --------------

TRAINER = """import torch
from torch import nn

class Block(nn.Module):
    def forward(self, x):
        return x

class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer_blocks = nn.ModuleList([Block() for _ in range(2)])

class Trainer:
    def compile_transformer(self, args, transformer):
        for i, block in enumerate(transformer.transformer_blocks):
            block = torch.compile(block, dynamic=args.compile_dynamic)
            transformer.transformer_blocks[i] = block
        return transformer
"""


def test_a_loop_over_a_parameters_blocks_compiles_the_class_that_binds_them():
    # `transformer` is a parameter of unknown class: the one nn.Module class here
    # binding `self.transformer_blocks` holds Blocks; the compile reads the loop's
    # `block` (its rebinding by the compile is seen only after it)
    model = model_of(TRAINER)
    (site,) = model.compile_sites
    assert compiled_module_class(model, site).name == "Block"


def test_not_when_a_plain_class_binds_that_attribute_too_or_the_name_is_no_parameter():
    plain = TRAINER + "\nclass Holder:\n    def __init__(self):\n        self.transformer_blocks = []\n"
    (site,) = model_of(plain).compile_sites
    assert compiled_module_class(model_of(plain), site) is None
    local = TRAINER.replace("    def compile_transformer(self, args, transformer):\n", "    def compile_transformer(self, args):\n        transformer = load()\n")
    model = model_of(local)
    assert compiled_module_class(model, model.compile_sites[0]) is None
    # the compiled value called in the loop afterwards sees two bindings: no class from the loop
    called = TRAINER.replace("            transformer.transformer_blocks[i] = block\n", "            transformer.transformer_blocks[i] = block\n            block(1)\n")
    model = model_of(called)
    (use,) = [n for n in ast.walk(model.tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "block"]
    assert model.loop_module_class(use.func) is None
    assert model.loop_module_class(model.compile_sites[0].target).name == "Block"  # the compile's own read


def test_a_module_attribute_set_from_a_local_of_the_method_has_that_local_class():
    code = """import torch
from torch import nn

class Sampler(nn.Module):
    def forward(self, logits):
        return logits

class RBLNSampler(Sampler):
    pass

class Runner:
    def __init__(self):
        sampler = RBLNSampler()
        self.sampler = sampler
        self.sampler = torch.compile(self.sampler)
"""
    model = model_of(code)
    (site,) = model.compile_sites
    assert compiled_module_class(model, site).name == "RBLNSampler"
    # a local bound to something that is no module: none
    model = model_of(code.replace("sampler = RBLNSampler()", "sampler = make()"))
    assert compiled_module_class(model, model.compile_sites[0]) is None


def test_a_compile_in_a_conditional_expression_binds_its_name():
    # Distributed Shampoo: `self._per_group_step = (torch.compile(self._per_group_step_impl, ...)
    # if config is not None else self._per_group_step_impl)`: its calls run the compile when compiling
    code = """import torch

class Opt:
    def __init__(self, config):
        self._per_group_step = (
            torch.compile(self._per_group_step_impl)
            if config is not None
            else self._per_group_step_impl
        )

    def _per_group_step_impl(self, x, coeff):
        return x * coeff

    def step(self, x, coeff):
        return self._per_group_step(x, coeff)
"""
    model = model_of(code)
    (site,) = model.compile_sites
    assert site.binding == "self._per_group_step" and site.target_def.name == "_per_group_step_impl"
    assert [c.lineno for c in site.calls] == [15]
    # the compile as the condition binds nothing
    cond = code.replace("torch.compile(self._per_group_step_impl)\n            if config is not None", "self._per_group_step_impl\n            if torch.compile(self._per_group_step_impl)")
    (site,) = model_of(cond).compile_sites
    assert site.binding is None and site.calls == []


HELD = """import torch

class ImplA:
    def forward(self, x):
        return x

class ImplB:
    def forward(self, x):
        return -x

class Attention(torch.nn.Module):
    def __init__(self, impl):
        super().__init__()
        self.impl = impl

class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        impl = ImplA()
        self.attn = Attention(impl)
        {other}
    def forward(self, x):
        return self.attn.impl.forward(x)

model = torch.compile(Layer())
"""


def test_an_object_a_submodule_is_given_is_followed():
    # vLLM's layers call `self.mla_attn.impl.forward(...)`, the impl given to Attention(impl)
    model = model_of(HELD.format(other=""))
    reached = [(c.name, n) for c, n, _f in methods_reached_through_submodules(model, model.classes["Layer"], "forward")]
    assert reached == [("Layer", "forward"), ("ImplA", "forward")]


def test_an_object_of_two_classes_is_not_followed():
    model = model_of(HELD.format(other="self.other = Attention(ImplB())"))
    reached = [(c.name, n) for c, n, _f in methods_reached_through_submodules(model, model.classes["Layer"], "forward")]
    assert reached == [("Layer", "forward")]


def test_an_object_a_subclass_may_hand_on_is_not_followed():
    # `class Sub(Attention)` may pass another object to `super().__init__(impl)`
    code = HELD.format(other="") + "\nclass Sub(Attention):\n    def __init__(self):\n        super().__init__(ImplB())\n"
    model = model_of(code)
    reached = [(c.name, n) for c, n, _f in methods_reached_through_submodules(model, model.classes["Layer"], "forward")]
    assert reached == [("Layer", "forward")]


def test_a_method_of_a_module_level_class_compiled_at_class_level():
    """``RMSNorm.forward = torch.compile(RMSNorm.forward)`` (unsloth-zoo's
    patched norms): the compile is of the class's ``def``; a name that is
    no class of the module (an instance, an import) is not followed."""
    code = """
import torch
from other import Imported

class RMSNorm(torch.nn.Module):
    def forward(self, x):
        return x

RMSNorm.forward = torch.compile(RMSNorm.forward)
Imported.forward = torch.compile(Imported.forward)
norm = RMSNorm()
norm.forward = torch.compile(norm.forward)
"""
    sites = model_of(code).compile_sites
    assert [(s.binding, s.target_def.name if s.target_def else None) for s in sites] == [
        ("RMSNorm.forward", "forward"),
        ("Imported.forward", None),
        ("norm.forward", None),
    ]
