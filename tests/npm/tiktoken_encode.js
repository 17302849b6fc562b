// The reference encoding of a file with GPT-2's tokenizer, one token id a line: tiktoken's
// "gpt2" encoding, encode_ordinary (text only, "<|endoftext|>" as plain characters), as
// Ringmaster's BpeTokenizer encodes (worker/data/bpe_tokenizer.h).
//   node tests/npm/tiktoken_encode.js FILE      (FILE must be valid UTF-8)
"use strict";
const fs = require("fs");
const { get_encoding } = require("tiktoken");

const encoding = get_encoding("gpt2");
const text = new TextDecoder("utf-8", { fatal: true }).decode(fs.readFileSync(process.argv[2]));
const ids = encoding.encode_ordinary(text);
process.stdout.write(Array.from(ids).join("\n") + "\n");
encoding.free();
