"""FR023's reading of a parameter as a string (codemods/transforms/string_args.py):
an annotation that admits only a string (or nothing), or a string default.
A union with a tensor is a tensor at some calls (dia's `audio_prompt: str |
torch.Tensor | None`): no string to guard by value there."""

from __future__ import annotations

import ast

import pytest

from codemods.transforms.string_args import _annotated_str, string_parameters


@pytest.mark.parametrize(
    "annotation,is_str",
    [
        ("str", True),
        ("'str'", True),
        ("str | None", True),
        ("Optional[str]", True),
        ("typing.Optional[str]", True),
        ("Union[str, None]", True),
        ("str | torch.Tensor | None", False),
        ("Union[str, Tensor]", False),
        ("int", False),
        ("None", False),
        ("list[str]", False),
    ],
)
def test_a_string_annotation_admits_only_a_string_or_nothing(annotation, is_str):
    assert _annotated_str(ast.parse(annotation, mode="eval").body) is is_str


def test_string_parameters_by_annotation_or_default():
    fn = ast.parse(
        "def f(self, text: str, audio: str | torch.Tensor | None, mode='fast', n=3, *, tag: Optional[str] = None):\n    pass\n"
    ).body[0]
    assert string_parameters(fn) == ["text", "mode", "tag"]
