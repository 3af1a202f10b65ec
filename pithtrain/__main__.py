"""Command line: `python -m pithtrain {train,tokenize,convert,plot} ...` (also installed as `pithtrain`)."""

import argparse
import dataclasses
import sys
import typing

from pithtrain.config import UserInputError, describe_config, field_docs, load_dataclass
from pithtrain.models import KNOWN_FAMILIES, model_family
from pithtrain.modules.distributed import teardown_distributed
from pithtrain.tasks import convert_checkpoint, plot_metrics, pretrain_lm, tokenize_corpus


def add_dataclass_options(parser: argparse.ArgumentParser, cls: type, positional: str) -> None:
    """One argument per field of a task config, with the field's docstring as help; `positional` is bare."""
    docs = field_docs(cls)
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        kwargs = {"help": docs.get(f.name, "")}
        if typing.get_origin(hints[f.name]) is typing.Literal:
            kwargs["choices"] = typing.get_args(hints[f.name])
        if f.name == positional:
            parser.add_argument(f.name, nargs="+" if typing.get_origin(hints[f.name]) is list else None, **kwargs)
        elif f.default is dataclasses.MISSING:
            parser.add_argument("--" + f.name.replace("_", "-"), dest=f.name, required=True, **kwargs)
        else:
            parser.add_argument(
                "--" + f.name.replace("_", "-"),
                dest=f.name,
                type=type(f.default),
                default=f.default,
                **kwargs,
            )


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pithtrain", description="PithTrain: a compact MoE training framework.")
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser(
        "train",
        help="train a model from a TOML config",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train (or resume) a model. Example: python -m pithtrain train examples/qwen3-moe-tiny.toml",
        epilog="config keys (TOML sections; override any with --set section.key=value):\n"
        + "\n".join(describe_config(pretrain_lm.PretrainLMCfg))
        + "".join(
            f"\n  model.* with model.family = {name!r}:\n"
            + "\n".join(line.replace("  ", "    model.", 1) for line in describe_config(model_family(name).cfg_class))
            for name in KNOWN_FAMILIES
        ),
    )
    train.add_argument("config", help="TOML run config, e.g. examples/qwen3-moe-tiny.toml")
    train.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override a config key; the value is parsed as TOML (repeatable)",
    )

    tokenize = sub.add_parser(
        "tokenize",
        help="tokenize local text into packed token shards",
        description=tokenize_corpus.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_dataclass_options(tokenize, tokenize_corpus.TokenizeCorpusCfg, positional="inputs")

    convert = sub.add_parser(
        "convert",
        help="convert checkpoints to and from Hugging Face format",
        description=convert_checkpoint.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_dataclass_options(convert, convert_checkpoint.ConvertCheckpointCfg, positional="direction")

    plot = sub.add_parser(
        "plot",
        help="plot runs' metrics.jsonl (needs seaborn)",
        description=plot_metrics.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_dataclass_options(plot, plot_metrics.PlotMetricsCfg, positional="run_dirs")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        if args.command == "train":
            pretrain_lm.launch(pretrain_lm.load_pretrain_cfg(args.config, args.overrides))
            teardown_distributed()
        elif args.command == "tokenize":
            table = {k: v for k, v in vars(args).items() if k != "command"}
            tokenize_corpus.launch(load_dataclass(tokenize_corpus.TokenizeCorpusCfg, table))
        elif args.command == "convert":
            table = {k: v for k, v in vars(args).items() if k != "command"}
            convert_checkpoint.launch(load_dataclass(convert_checkpoint.ConvertCheckpointCfg, table))
        elif args.command == "plot":
            table = {k: v for k, v in vars(args).items() if k != "command"}
            plot_metrics.launch(load_dataclass(plot_metrics.PlotMetricsCfg, table))
    except UserInputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except pretrain_lm.TrainingStopped as e:
        print(f"stopped: {e}", file=sys.stderr)
        return e.exit_status
    except KeyboardInterrupt:
        print(f"interrupted (Ctrl-C): `pithtrain {args.command}` stopped before it finished.", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
