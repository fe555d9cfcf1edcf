# Sourced by the benchmark scripts: sets `train` and `dev` to CoNLL-2003 from $CORPUS (default
# ../shared/data/conll2003), or, where it is absent, to a synthetic corpus of the same shape
# written into the directory given as $1.
bench_corpus() {
  local corpus=${CORPUS:-../shared/data/conll2003}
  if [ -f "$corpus/train.txt" ]; then
    train=$corpus/train.txt dev=$corpus/valid.txt
  else
    echo "no CoNLL-2003 at $corpus: using a synthetic corpus of the same shape"
    python3 scripts/data/synthetic_corpus.py "$1"
    train=$1/train.txt dev=$1/dev.txt
  fi
}
