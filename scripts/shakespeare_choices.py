#!/usr/bin/env python3
"""shakespeare_choices.py TEXT OUT [N] -- a multiple-choice file in llm.c's format from a text.

For byte-level models (vocab_size 256), such as configs/shakespeare.yaml's: example i takes the
24 bytes of TEXT at 1000 + 4099 i as its context, the 8 bytes after them as the right completion
(at index i % 4), and three fixed shuffles of those 8 bytes as the wrong ones -- the examples
tests/eval_choices_cli_test.cc builds in C++, so that only a model scoring each completion at its
own positions tells them apart (a model trained for 300 steps scores about 0.97; chance is 0.25).
N (default 200) examples; the text must hold them.

Used where the C++ test helpers are not at hand: scripts/gpu-speed.sh scores `data.choices` on
the cuda backend with it. The format is worker/data/choice_file.h's (llm.c's write_evalfile):
256 int32 of header, then each example as uint16s.
"""
import struct
import sys

CONTEXT, COMPLETION = 24, 8
SHUFFLES = ([7, 6, 5, 4, 3, 2, 1, 0], [3, 0, 6, 1, 7, 4, 2, 5], [5, 2, 7, 0, 4, 1, 3, 6])
MAGIC, VERSION = 20240522, 1


def examples(text, n):
    out = []
    for i in range(n):
        at = 1000 + i * 4099
        if at + CONTEXT + COMPLETION > len(text):
            sys.exit(f"shakespeare_choices.py: the text holds {i} examples, not {n}")
        context = list(text[at:at + CONTEXT])
        truth = list(text[at + CONTEXT:at + CONTEXT + COMPLETION])
        label = i % 4
        wrong = iter([[truth[k] for k in s] for s in SHUFFLES])
        completions = [truth if c == label else next(wrong) for c in range(4)]
        out.append((label, context, completions))
    return out


def encode(exs):
    body, longest = b"", 0
    for index, (label, context, completions) in enumerate(exs):
        fields = [index, label, len(completions), len(context), *context]
        for c in completions:
            fields += [len(c), *c]
        size = 2 * (2 + len(fields))  # the start marker and the size itself count
        longest = max(longest, size)
        body += struct.pack(f"<{2 + len(fields)}H", 65535, size, *fields)
    header = struct.pack("<256i", MAGIC, VERSION, len(exs), longest, *([0] * 252))
    return header + body


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.strip().splitlines()[0])
    n = int(sys.argv[3]) if len(sys.argv) == 4 else 200
    with open(sys.argv[1], "rb") as f:
        text = f.read()
    with open(sys.argv[2], "wb") as f:
        f.write(encode(examples(text, n)))


if __name__ == "__main__":
    main()
