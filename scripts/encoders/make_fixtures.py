"""Tiny random checkpoints of each encoder family, and what the Python libraries make of them.

The Rust parity tests (`crates/model/tests/encoder_parity.rs`, `crates/data/tests/pieces.rs`)
load each checkpoint and compare with what this script recorded: the sub-tokens and word ids
the Python `tokenizers` library gives each sentence's words, and the last hidden state
`transformers` computes for them.

    python -m venv ~/.cache/nertrain-encoders
    ~/.cache/nertrain-encoders/bin/pip install torch transformers tokenizers safetensors
    ~/.cache/nertrain-encoders/bin/python scripts/encoders/make_fixtures.py data/encoders

Each family gets a folder holding a checkpoint as Hugging Face writes one (`config.json`,
`model.safetensors`, `tokenizer.json`) and `expected.json`; `bert-bin` holds the BERT weights as
PyTorch's `pytorch_model.bin`. The weights are drawn from a fixed
seed, but another version of torch may draw others: regenerate all of a family's files
together, never one of them.
"""

import argparse
import json
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import (
    BertConfig,
    BertModel,
    DistilBertConfig,
    DistilBertModel,
    RobertaConfig,
    RobertaModel,
)

# Words the tokenizers are trained on: sub-tokens come from them, and the sentences below
# also hold words (and characters) they never saw.
CORPUS = [
    "Peter Blackburn lives in Berlin and works for the European Commission .",
    "EU rejects German call to boycott British lamb .",
    "The European Union 's veterinary committee met in Brussels on Monday .",
    "Germany imported 47,600 sheep from Britain last year , nearly half of total imports .",
    "Rare Hendrix song draft sells for almost $ 17,000 .",
    "Japan coach Shu Kamo said the team would play in Tokyo .",
]

# Each sentence as words (the unit nertrain labels). The fourth holds a word the tokenizers
# turn into nothing (a zero-width space alone), the fifth is longer than the tiny models'
# positions once it is cut into sub-tokens, in its own test of windows.
SENTENCES = [
    ["Peter", "Blackburn", "lives", "in", "Berlin", "."],
    ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."],
    ["Unseen", "Zwölfkampf", "words", ",", "such", "as", "Xylophonics", "!"],
    ["Japan", "\u200b", "coach", "Shu", "Kamo", "."],
]

HIDDEN = 32
LAYERS = 2
HEADS = 4
INTERMEDIATE = 37
POSITIONS = 64
SEED = 20261128


def wordpiece_tokenizer(lowercase: bool) -> Tokenizer:
    """A BERT-style WordPiece tokenizer.json, trained on CORPUS."""
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    trainer = trainers.WordPieceTrainer(vocab_size=120, special_tokens=specials)
    tokenizer.train_from_iterator(CORPUS, trainer)
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    tokenizer.decoder = decoders.WordPiece()
    if not lowercase:
        # As all-MiniLM-L6-v2's file does: a fixed padding and truncation nertrain must clear.
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]", length=24)
        tokenizer.enable_truncation(max_length=24)
    return tokenizer


def bpe_tokenizer() -> Tokenizer:
    """A RoBERTa-style byte-level BPE tokenizer.json, trained on CORPUS."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    tokenizer.post_processor = processors.RobertaProcessing(
        ("</s>", tokenizer.token_to_id("</s>")),
        ("<s>", tokenizer.token_to_id("<s>")),
        trim_offsets=True,
        add_prefix_space=True,
    )
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def bert(vocab_size: int) -> BertModel:
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        max_position_embeddings=POSITIONS,
        type_vocab_size=2,
        hidden_act="gelu",
        pad_token_id=0,
    )
    return BertModel(config, add_pooling_layer=True)


def distilbert(vocab_size: int) -> DistilBertModel:
    config = DistilBertConfig(
        vocab_size=vocab_size,
        dim=HIDDEN,
        n_layers=LAYERS,
        n_heads=HEADS,
        hidden_dim=INTERMEDIATE,
        max_position_embeddings=POSITIONS,
        activation="gelu",
        pad_token_id=0,
    )
    return DistilBertModel(config)


def roberta(vocab_size: int, pad_id: int) -> RobertaModel:
    config = RobertaConfig(
        vocab_size=vocab_size,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=INTERMEDIATE,
        # RoBERTa's positions start after the pad id: two more than the longest input.
        max_position_embeddings=POSITIONS + pad_id + 1,
        type_vocab_size=1,
        hidden_act="gelu_new",
        layer_norm_eps=1e-5,
        pad_token_id=pad_id,
        bos_token_id=0,
        eos_token_id=2,
    )
    return RobertaModel(config, add_pooling_layer=False)


def encode(tokenizer: Tokenizer, words: list[str], prefix_space: bool):
    """The sub-tokens of one sentence's words, as nertrain asks for them."""
    if prefix_space:
        # Byte-level BPE reads a word as it would read it after a space.
        words = [" " + word for word in words]
    encoding = tokenizer.encode(words, is_pretokenized=True)
    return encoding.ids, [(-1 if w is None else w) for w in encoding.word_ids]


def rounded(states: torch.Tensor) -> list:
    """To 1e-7, a hundredth of what the tests allow, so the fixtures stay small."""
    return [[round(value, 7) for value in row] for row in states.tolist()]


def record(model, tokenizer: Tokenizer, prefix_space: bool, pad_id: int) -> dict:
    """Every sentence's sub-tokens, word ids, and last hidden state, in one padded batch."""
    tokenizer.no_padding()
    tokenizer.no_truncation()
    encoded = [encode(tokenizer, words, prefix_space) for words in SENTENCES]
    longest = max(len(ids) for ids, _ in encoded)
    ids = torch.full((len(encoded), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(encoded), longest), dtype=torch.long)
    for row, (pieces, _) in enumerate(encoded):
        ids[row, : len(pieces)] = torch.tensor(pieces)
        mask[row, : len(pieces)] = 1
    model.eval()
    with torch.no_grad():
        hidden = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    return {
        "sentences": [
            {
                "words": words,
                "ids": pieces,
                "word_ids": word_ids,
                # Every layer's output at the real positions, the embeddings' first.
                "hidden_states": [
                    rounded(layer[row, : len(pieces)]) for layer in hidden.hidden_states
                ],
            }
            for row, (words, (pieces, word_ids)) in enumerate(zip(SENTENCES, encoded))
        ]
    }


def write(out: Path, name: str, model, tokenizer: Tokenizer, prefix_space: bool, pad_id: int):
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    # Saved as it ships, before `record` clears its padding and truncation.
    tokenizer.save(str(folder / "tokenizer.json"))
    expected = record(model, tokenizer, prefix_space, pad_id)
    model.save_pretrained(folder, safe_serialization=True)
    if name == "bert":
        # The same weights as PyTorch's own file, read by the same test.
        pickled = out / "bert-bin"
        pickled.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), pickled / "pytorch_model.bin")
        (pickled / "config.json").write_text((folder / "config.json").read_text())
    text = json.dumps(expected, indent=None, separators=(",", ":"))
    (folder / "expected.json").write_text(text + "\n")
    print(f"{folder}: {len(expected['sentences'])} sentences")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="the fixtures' folder")
    out = parser.parse_args().out

    torch.manual_seed(SEED)
    cased = wordpiece_tokenizer(lowercase=False)
    write(out, "bert", bert(cased.get_vocab_size()), cased, False, 0)

    uncased = wordpiece_tokenizer(lowercase=True)
    write(out, "distilbert", distilbert(uncased.get_vocab_size()), uncased, False, 0)

    bpe = bpe_tokenizer()
    pad = bpe.token_to_id("<pad>")
    write(out, "roberta", roberta(bpe.get_vocab_size(), pad), bpe, True, pad)


if __name__ == "__main__":
    main()
