"""Text tokenizer rebuilt from GGUF metadata, and prompt building, against upstream.

Expected ids: tests/data/fixtures/python_tokenizer.json, written by
tests/reference/dump_python_fixtures.py with the tiny checkpoint's tokenizer through
transformers' AutoTokenizer and upstream ``_prepare_inference_inputs``.
"""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import pytest

from omnivoice.models.omnivoice.prompt import Prompt, build_prompt, combine_text
from omnivoice.models.omnivoice.tokenizer import TextTokenizer

# The tiny model's audio rows and mask id (its omnivoice.num_audio_codebook / audio_mask_id).
NUM_CODEBOOKS = 8
MASK_ID = 1024

DATA = Path(__file__).parents[1] / "data"
TINY_TOKENIZER = DATA / "tiny_hf" / "tokenizer.json"


# The prompt's added tokens, whose ids an LM GGUF holds as omnivoice.special.<name>.
SPECIAL = ("denoise", "lang_start", "lang_end", "instruct_start", "instruct_end", "text_start", "text_end")


def gguf_vocab(tokenizer_json: Path) -> dict:
    """The ``tokenizer.ggml.*`` and ``omnivoice.special.*`` values an LM GGUF holds for a Hugging
    Face tokenizer.json."""
    with open(tokenizer_json, encoding="utf-8") as f:
        tok = json.load(f)
    by_id = {i: (s, gguf.TokenType.NORMAL) for s, i in tok["model"]["vocab"].items()}
    for added in tok["added_tokens"]:
        kind = gguf.TokenType.CONTROL if added["special"] else gguf.TokenType.USER_DEFINED
        by_id[added["id"]] = (added["content"], kind)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    special = {name: next(i for i, (t, _) in by_id.items() if t == f"<|{name}|>") for name in SPECIAL}
    return {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "qwen2",
        "tokenizer.ggml.tokens": [by_id[i][0] for i in range(len(by_id))],
        "tokenizer.ggml.token_type": [int(by_id[i][1]) for i in range(len(by_id))],
        "tokenizer.ggml.merges": merges,
        **{f"omnivoice.special.{name}": i for name, i in special.items()},
    }


@pytest.fixture(scope="module")
def vocab_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    meta = gguf_vocab(TINY_TOKENIZER)
    path = tmp_path_factory.mktemp("gguf") / "vocab.gguf"
    writer = gguf.GGUFWriter(str(path), "omnivoice-lm")
    writer.add_tokenizer_model(meta["tokenizer.ggml.model"])
    writer.add_tokenizer_pre(meta["tokenizer.ggml.pre"])
    writer.add_token_list(meta["tokenizer.ggml.tokens"])
    writer.add_token_types(meta["tokenizer.ggml.token_type"])
    writer.add_token_merges(meta["tokenizer.ggml.merges"])
    for name in SPECIAL:
        writer.add_uint32(f"omnivoice.special.{name}", meta[f"omnivoice.special.{name}"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def tokenizer(vocab_gguf: Path) -> TextTokenizer:
    return TextTokenizer.from_gguf(vocab_gguf)


@pytest.fixture(scope="module")
def ref() -> dict:
    with open(DATA / "fixtures" / "python_tokenizer.json", encoding="utf-8") as f:
        return json.load(f)


def test_corpus_ids(tokenizer: TextTokenizer, ref: dict) -> None:
    for text, ids in zip(ref["corpus"], ref["ids"]):
        assert tokenizer.encode(text) == ids, text


def test_corpus_ids_with_nonverbal_tags(tokenizer: TextTokenizer, ref: dict) -> None:
    for text, ids in zip(ref["corpus"], ref["ids_nonverbal"]):
        assert tokenizer.encode_with_nonverbal_tags(text) == ids, text


def test_metadata_dict_equals_gguf(tokenizer: TextTokenizer, ref: dict) -> None:
    from_dict = TextTokenizer.from_metadata(gguf_vocab(TINY_TOKENIZER))
    for text in ref["corpus"]:
        assert from_dict.encode(text) == tokenizer.encode(text)


def test_converter_output(tiny_lm_gguf: Path, ref: dict) -> None:
    # The GGUF written by our converter carries the same vocabulary.
    tokenizer = TextTokenizer.from_gguf(tiny_lm_gguf)
    for text, ids in zip(ref["corpus"], ref["ids"]):
        assert tokenizer.encode(text) == ids, text


def test_special_token_lookup(tokenizer: TextTokenizer) -> None:
    ids = tokenizer.encode("<|text_start|>")
    assert ids == [tokenizer.token_to_id("<|text_start|>")]
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tokenizer.token_to_id("<|no_such_token|>")


def _prompt(tokenizer: TextTokenizer, case: dict, denoise: bool) -> Prompt:
    """The prompt of a fixture case (text, target_len, ref_text, ref_codes, lang, instruct)."""
    return build_prompt(
        tokenizer,
        case["text"],
        case["target_len"],
        ref_text=case["ref_text"],
        ref_codes=None if case["ref_codes"] is None else np.array(case["ref_codes"], dtype=np.int64),
        lang=case["lang"],
        instruct=case["instruct"],
        denoise=denoise,
        num_codebooks=NUM_CODEBOOKS,
        mask_id=MASK_ID,
    )


def test_prompts(tokenizer: TextTokenizer, ref: dict) -> None:
    for case in ref["prompts"]:
        p = _prompt(tokenizer, case, case["denoise"])
        np.testing.assert_array_equal(p.input_ids, np.array(case["input_ids"]), err_msg=case["text"])
        np.testing.assert_array_equal(p.audio_mask, np.array(case["audio_mask"]), err_msg=case["text"])
        assert p.input_ids.dtype == np.int32 and p.target_start == p.length - case["target_len"]


def test_prompts_of_decoding_runs(tokenizer: TextTokenizer) -> None:
    with open(DATA / "fixtures" / "python_maskgit.json", encoding="utf-8") as f:
        runs = json.load(f)["runs"]
    for run in runs:
        for item in run["items"]:
            p = _prompt(tokenizer, item, run["denoise"])
            np.testing.assert_array_equal(p.input_ids, np.array(item["prompt_ids"]), err_msg=item["text"])
            np.testing.assert_array_equal(p.audio_mask, np.array(item["prompt_audio_mask"]))


def test_uncond_is_the_target_window(tokenizer: TextTokenizer) -> None:
    p = build_prompt(tokenizer, "Hello.", 5, ref_text="Ref.", ref_codes=np.zeros((8, 3), np.int32),
                     num_codebooks=NUM_CODEBOOKS, mask_id=MASK_ID)
    ids, mask = p.uncond()
    assert ids.shape == (8, 5) and (ids == 1024).all() and mask.all()


def test_combine_text() -> None:
    assert combine_text(" b\n ", " a ") == "a b"
    assert combine_text("中 文 and x\t\t y （1）") == "中文and x y (1)"
    assert combine_text("text", "") == "text"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_target_tokens": 0}, "num_target_tokens"),
        ({"num_target_tokens": 2.5}, "num_target_tokens"),
        ({"ref_codes": np.zeros((7, 3), np.int32)}, r"shape \[8, T\]"),
        ({"ref_codes": np.zeros((8, 0), np.int32)}, r"shape \[8, T\]"),
        ({"ref_codes": np.full((8, 3), 1024)}, r"\[0, 1024\)"),
        ({"ref_codes": np.zeros((8, 3), np.float32)}, "integers"),
    ],
)
def test_bad_prompt_input(tokenizer: TextTokenizer, kwargs: dict, match: str) -> None:
    args = {"num_target_tokens": 3, **kwargs}
    with pytest.raises(ValueError, match=match):
        build_prompt(tokenizer, "text", args.pop("num_target_tokens"), num_codebooks=NUM_CODEBOOKS, mask_id=MASK_ID,
                     **args)


def test_bad_prompt_arrays() -> None:
    with pytest.raises(ValueError, match="target_len"):
        Prompt(np.zeros((8, 4), np.int32), np.ones(4, bool), 5)
    with pytest.raises(ValueError, match="audio_mask must be true"):
        Prompt(np.zeros((8, 4), np.int32), np.zeros(4, bool), 2)


def test_bad_vocab() -> None:
    with pytest.raises(ValueError, match="token types"):
        TextTokenizer(["a", "b"], [1], [])
    with pytest.raises(ValueError, match="unknown token type"):
        TextTokenizer(["a"], [9], [])
    with pytest.raises(ValueError, match="malformed BPE merge"):
        TextTokenizer(["a", "b"], [1, 1], ["ab"])
    with pytest.raises(ValueError, match="unsupported tokenizer"):
        TextTokenizer.from_metadata(
            {
                "tokenizer.ggml.model": "llama",
                "tokenizer.ggml.tokens": [],
                "tokenizer.ggml.token_type": [],
                "tokenizer.ggml.merges": [],
            }
        )
    with pytest.raises(ValueError, match="lacks the tokenizer keys"):
        TextTokenizer.from_metadata({})


def test_missing_or_bad_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        TextTokenizer.from_gguf(tmp_path / "missing.gguf")
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file at all")
    with pytest.raises(ValueError, match="not a GGUF"):
        TextTokenizer.from_gguf(junk)


@pytest.fixture(scope="module")
def ref_prompts() -> tuple[dict, np.lib.npyio.NpzFile]:
    # Made by the reference helper's tests/reference/dump_fixtures.py (see tests/data/README.md).
    with open(DATA / "fixtures" / "prompts.json", encoding="utf-8") as f:
        meta = json.load(f)
    return meta, np.load(DATA / "fixtures" / "prompts.npz")


def test_reference_corpus(tokenizer: TextTokenizer, ref_prompts: tuple) -> None:
    meta, arrays = ref_prompts
    ids, offsets = arrays["tokenizer_ids"], arrays["tokenizer_offsets"]
    for i, (text, decoded) in enumerate(zip(meta["tokenizer_corpus"], meta["tokenizer_decoded"])):
        expected = ids[offsets[i] : offsets[i + 1]].tolist()
        assert tokenizer.encode(text) == expected, text
        assert tokenizer.decode(expected) == decoded


def test_reference_prompt_cases(tokenizer: TextTokenizer, ref_prompts: tuple) -> None:
    meta, arrays = ref_prompts
    for case in meta["cases"]:
        assert combine_text(case["text"], case["ref_text"]) == case["combined_text"], case["name"]
        p = build_prompt(
            tokenizer,
            case["text"],
            case["num_target_tokens"],
            ref_text=case["ref_text"],
            ref_codes=arrays["ref_codes"] if case["uses_ref_codes"] else None,
            lang=case["lang_resolved"],
            instruct=case["instruct_resolved"],
            denoise=case["denoise"],
            num_codebooks=NUM_CODEBOOKS,
            mask_id=MASK_ID,
        )
        np.testing.assert_array_equal(p.input_ids, arrays[case["name"] + "__input_ids"], err_msg=case["name"])
        np.testing.assert_array_equal(p.audio_mask, arrays[case["name"] + "__audio_mask"], err_msg=case["name"])
