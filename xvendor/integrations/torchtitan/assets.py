"""The small assets torchtitan's debug configs read, built offline: ``make_assets(root)``.

torchtitan's debug configs read ``./tests/assets/tokenizer`` (a 2048-token BPE
``tokenizer.json``) and the ``c4_test`` dataset (``./tests/assets/c4_test``) relative to the
working directory; neither ships in the wheel. ``make_assets(root)`` builds both under
``root`` with no network: a byte-level BPE trained with the ``tokenizers`` library (vocab
2048, the debug models' ``vocab_size``) and JSON lines of text. The text is real public
prose that is already on every machine that has torch: the docstrings of torch's own
Python sources, read from the installed package (so the tokenizer and the loss curves are
those of natural English + code, not of random bytes). Run torchtitan with ``root`` as the
working directory.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import torch

VOCAB = 2048
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"
_SOURCES = ("nn/modules", "optim", "distributed/fsdp", "utils/data")


def torch_docstrings(limit: int = 4000) -> list[str]:
    """Up to ``limit`` docstrings (>= 200 characters) from torch's installed Python sources,
    in a fixed order (sorted paths, then source order)."""
    base = Path(torch.__file__).parent
    docs: list[str] = []
    for sub in _SOURCES:
        for path in sorted((base / sub).rglob("*.py")):
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)):
                    doc = ast.get_docstring(node)
                    if doc and len(doc) >= 200:
                        docs.append(doc)
                        if len(docs) >= limit:
                            return docs
    return docs


def _train_tokenizer(texts: list[str], out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=True)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=[BOS, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(texts, trainer)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": BOS, "eos_token": EOS, "add_bos_token": True, "add_eos_token": True}))


def make_assets(root: str | Path, *, documents: int = 2000) -> Path:
    """Build ``root/tests/assets/{tokenizer,c4_test}`` (idempotent); returns ``root``."""
    root = Path(root)
    tok_dir, data_dir = root / "tests/assets/tokenizer", root / "tests/assets/c4_test"
    if (tok_dir / "tokenizer.json").exists() and (data_dir / "data.json").exists():
        return root
    texts = torch_docstrings(documents)
    if len(texts) < 100:
        raise RuntimeError(f"make_assets: found only {len(texts)} docstrings in torch's sources")
    _train_tokenizer(texts, tok_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / "data.json", "w") as f:
        for text in texts:
            f.write(json.dumps({"text": text}) + "\n")
    return root
