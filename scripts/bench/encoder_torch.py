#!/usr/bin/env python3
"""The PyTorch side of scripts/bench/encoder_reference.sh: a pretrained encoder under a
BiLSTM-CRF as a PyTorch user writes it (`transformers` + pytorch-crf), in the shape of
nertrain's `model.pretrained` model that the script compares it with:

    encoder (all its layers) -> a learned softmax mix of the layers, scaled
      -> each word's first sub-token, beside a word embedding (50) and character CNN
         features (30-dim characters, 50 filters of width 3, max-pooled)
      -> BiLSTM (100 a direction) -> Linear -> torchcrf.CRF

    encoder_torch.py train --checkpoint DIR --train FILE --model OUT [--batch-size 10] [--threads 1]
        one epoch over FILE (CoNLL, tag last) with the encoder fine-tuned (AdamW 5e-5, weight
        decay 0.01; Adam 1e-3 for the rest; each clipped at 5); saves the model to OUT and prints
        the epoch's seconds and tokens/s as JSON
    encoder_torch.py tag --model OUT --input TEXT [--batch-size 32] [--threads 1]
        tags TEXT (one text per line) end to end: words cut with a regular expression, sub-tokens,
        Viterbi, entities with character offsets as JSON lines on stdout

Only speed is compared: the epoch trains, the tagger decodes, nothing is scored.
"""
import argparse
import importlib.util
import json
import os
import re
import sys
import time

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torchcrf import CRF
from seqeval.metrics.sequence_labeling import get_entities
from transformers import AutoConfig, AutoModel, AutoTokenizer

# CoNLL is read as the PyTorch reference reads it (../shared/ref, REF_SCRIPT to move it).
_ref = os.environ.get("REF_SCRIPT", os.path.join(os.path.dirname(__file__), "../../../shared/ref/bilstm_crf_torch.py"))
_spec = importlib.util.spec_from_file_location("bilstm_crf_torch", _ref)
reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reference)

WORD = re.compile(r"\w+(?:[-'.]\w+)*|[^\w\s]")


class ScalarMix(nn.Module):
    """ELMo's mix of an encoder's layers: softmax weights and one scale."""

    def __init__(self, layers):
        super().__init__()
        self.weights = nn.Parameter(torch.zeros(layers))
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, states):
        weights = torch.softmax(self.weights, 0)
        return self.scale * sum(w * s for w, s in zip(weights, states))


class Tagger(nn.Module):
    def __init__(self, checkpoint, words, chars, tags, pretrained=True):
        super().__init__()
        # A saved tagger holds the encoder's weights: only its shape is read from the checkpoint.
        if pretrained:
            self.encoder = AutoModel.from_pretrained(checkpoint)
        else:
            self.encoder = AutoModel.from_config(AutoConfig.from_pretrained(checkpoint))
        hidden = self.encoder.config.hidden_size
        self.mix = ScalarMix(self.encoder.config.num_hidden_layers + 1)
        self.words = nn.Embedding(len(words), 50)
        self.chars = nn.Embedding(len(chars), 30)
        self.conv = nn.Conv1d(30, 50, 3, padding=1)
        self.lstm = nn.LSTM(hidden + 100, 100, bidirectional=True, batch_first=True)
        self.dropout = nn.Dropout(0.5)
        self.out = nn.Linear(200, len(tags))
        self.crf = CRF(len(tags), batch_first=True)

    def emissions(self, batch):
        out = self.encoder(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], output_hidden_states=True
        )
        mixed = self.mix(out.hidden_states)
        first = batch["first"]
        states = mixed.gather(1, first.unsqueeze(-1).expand(-1, -1, mixed.size(-1)))
        b, w, c = batch["chars"].shape
        chars = self.conv(self.chars(batch["chars"].view(b * w, c)).transpose(1, 2)).max(2).values
        x = torch.cat([states, self.words(batch["words"]), chars.view(b, w, -1)], -1)
        packed = pack_padded_sequence(self.dropout(x), batch["lengths"], batch_first=True, enforce_sorted=False)
        y, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True, total_length=w)
        return self.out(self.dropout(y))


def make_batch(tokenizer, vocab, words):
    """The tensors of a batch of sentences given as lists of words."""
    enc = tokenizer(words, is_split_into_words=True, padding=True, truncation=True, max_length=512, return_tensors="pt")
    width = max(len(s) for s in words)
    first = torch.zeros(len(words), width, dtype=torch.long)
    for i in range(len(words)):
        seen = set()
        for position, word in enumerate(enc.word_ids(i)):
            if word is not None and word not in seen:
                seen.add(word)
                first[i, word] = position
    longest = max(len(w) for s in words for w in s)
    ids = torch.zeros(len(words), width, dtype=torch.long)
    chars = torch.zeros(len(words), width, longest, dtype=torch.long)
    for i, sentence in enumerate(words):
        for j, word in enumerate(sentence):
            ids[i, j] = vocab["words"].get(word.lower(), 1)
            chars[i, j, : len(word)] = torch.tensor([vocab["chars"].get(c, 1) for c in word])
    lengths = torch.tensor([len(s) for s in words])
    mask = torch.arange(width)[None, :] < lengths[:, None]
    return {
        "input_ids": enc["input_ids"],
        "attention_mask": enc["attention_mask"],
        "first": first,
        "words": ids,
        "chars": chars,
        "lengths": lengths,
        "mask": mask,
    }


def train(args):
    sentences = reference.read_conll(args.train)
    vocab = {
        "words": {w: i for i, w in enumerate(["<pad>", "<unk>"] + sorted({w.lower() for ws, _ in sentences for w in ws}))},
        "chars": {c: i for i, c in enumerate(["<pad>", "<unk>"] + sorted({c for ws, _ in sentences for w in ws for c in w}))},
        "tags": sorted({t for _, ts in sentences for t in ts}),
    }
    tokenizer = AutoTokenizer.from_pretrained(args.checkpoint)
    model = Tagger(args.checkpoint, vocab["words"], vocab["chars"], vocab["tags"])
    encoder = list(model.encoder.parameters())
    rest = [p for n, p in model.named_parameters() if not n.startswith("encoder.")]
    encoder_opt = torch.optim.AdamW(encoder, lr=5e-5, weight_decay=0.01)
    rest_opt = torch.optim.Adam(rest, lr=1e-3)
    tag_ids = {t: i for i, t in enumerate(vocab["tags"])}
    # Batches are made before the clock starts, as nertrain encodes its corpus before its epochs.
    batches = []
    for at in range(0, len(sentences), args.batch_size):
        chunk = sentences[at : at + args.batch_size]
        batch = make_batch(tokenizer, vocab, [words for words, _ in chunk])
        batch["gold"] = torch.zeros_like(batch["words"])
        for i, (_, tags) in enumerate(chunk):
            batch["gold"][i, : len(tags)] = torch.tensor([tag_ids[t] for t in tags])
        batches.append(batch)
    model.train()
    started = time.perf_counter()
    for batch in batches:
        loss = -model.crf(model.emissions(batch), batch["gold"], mask=batch["mask"], reduction="sum")
        encoder_opt.zero_grad()
        rest_opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(encoder, 5.0)
        nn.utils.clip_grad_norm_(rest, 5.0)
        encoder_opt.step()
        rest_opt.step()
    seconds = time.perf_counter() - started
    tokens = sum(len(words) for words, _ in sentences)
    torch.save({"state": model.state_dict(), "vocab": vocab, "checkpoint": args.checkpoint}, args.model)
    print(json.dumps({"seconds": seconds, "tokens": tokens, "tokens_per_second": tokens / seconds}))


def entities(text, spans, tags):
    """The chunks of a text's tags (seqeval's reading) with their character offsets."""
    return [
        {"label": label, "start": spans[first][0], "end": spans[last][1], "text": text[spans[first][0] : spans[last][1]]}
        for label, first, last in get_entities(tags)
    ]


def tag(args):
    saved = torch.load(args.model, weights_only=False)
    vocab = saved["vocab"]
    tokenizer = AutoTokenizer.from_pretrained(saved["checkpoint"])
    model = Tagger(saved["checkpoint"], vocab["words"], vocab["chars"], vocab["tags"], pretrained=False)
    model.load_state_dict(saved["state"])
    model.eval()
    texts = [line.rstrip("\n") for line in open(args.input, encoding="utf-8")]
    out = sys.stdout
    with torch.inference_mode():
        for at in range(0, len(texts), args.batch_size):
            chunk = texts[at : at + args.batch_size]
            spans = [[m.span() for m in WORD.finditer(t)] or [(0, 0)] for t in chunk]
            words = [[t[s:e] or " " for s, e in sp] for t, sp in zip(chunk, spans)]
            batch = make_batch(tokenizer, vocab, words)
            paths = model.crf.decode(model.emissions(batch), mask=batch["mask"])
            for text, sp, path in zip(chunk, spans, paths):
                found = entities(text, sp, [vocab["tags"][i] for i in path])
                out.write(json.dumps({"text": text, "entities": found}) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["train", "tag"])
    parser.add_argument("--checkpoint")
    parser.add_argument("--train")
    parser.add_argument("--model", required=True)
    parser.add_argument("--input")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(42)
    if args.mode == "train":
        args.batch_size = args.batch_size or 10
        train(args)
    else:
        args.batch_size = args.batch_size or 32
        tag(args)


if __name__ == "__main__":
    main()
