"""``python -m eval``: the evaluator's command line (see eval/cli.py)."""

from eval.cli import main

if __name__ == "__main__":
    main(prog_name="python -m eval")
