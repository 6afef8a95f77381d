#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/ (a few KB).

The seeds are the inputs of the unit tests and the ready specs in experiments/: valid ones, so
that the fuzzer starts deep inside the parsers, and broken ones, so that every error path is
reached from the start; plus every input that once crashed ddplab (crash-<what>, each with a
regression test in tests/spec or tests/data). Run it again after changing it; it only writes
its own files.
"""
import gzip
import os
import re
import struct

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))


def write(target, name, data):
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# fuzz_spec: spec files.
for name in sorted(n for n in os.listdir(os.path.join(root, "experiments")) if n.endswith(".json")):
    with open(os.path.join(root, "experiments", name), "rb") as f:
        write("fuzz_spec", "experiment-" + name, f.read())
specs = {
    "minimal.json": '{"name": "x"}',
    "batch-global.json": '{"name": "x", "batch": {"global": 64}, "replicas": {"count": 4}}',
    "sweep.json": '{"name": "x", "sweep": {"replicas.count": [1, 2], "optimizer.lr": [0.1, 0.2]}, "repeats": 2}',
    "sweep-zip.json": '{"name": "x", "sweep_zip": {"replicas.count": [1, 2], "batch.global": [64, 128]}}',
    "sweep-object.json": '{"name": "x", "sweep": {"optimizer": [{"name": "adam", "lr": 0.001}], "dataset.root": ["/tmp/a b/../x"]}}',
    "all-sections.json": '{"name": "x.y-1", "dataset": {"name": "idx", "root": "/d", "train_limit": 10, "test_limit": 5},'
                         ' "model": {"name": "mlp", "hidden": 8, "dropout": 0}, "optimizer": {"name": "adamw", "betas": [0.8, 0.9],'
                         ' "eps": 1e-6, "weight_decay": 0.01}, "schedule": {"decay": "multistep", "milestones": [1, 2], "gamma": 0.5,'
                         ' "warmup_epochs": 0.5, "scale_rule": "sqrt", "base_batch": 32}, "replicas": {"threads": 2, "reduce": "sum",'
                         ' "bucket_mb": 1, "timeout_s": 5, "max_restarts": 1}, "checkpoint": {"every_epochs": 0},'
                         ' "debug": {"fault": "throw", "rank": 0, "step": 3}, "report": {"target_acc": 0.5}, "epochs": 2, "seed": 7}',
    "cifar-sync.json": '{"name": "x", "dataset": {"name": "cifar10", "augment": "standard"}, "model": {"name": "resnet20",'
                       ' "sync_bn": true}, "replicas": {"count": 2, "sync": {"local_sgd": {"period": 4, "start_epoch": 1}}}}',
    "easgd-simulated.json": '{"name": "x", "replicas": {"count": 4, "mode": "simulated", "sync": {"easgd": {"period": 2,'
                            ' "alpha": 0.2}}}, "model": {"name": "cifar_tf_cnn"}, "dataset": {"name": "cifar100"}}',
    "weight-decay-groups.json": '{"name": "x", "optimizer": {"weight_decay": 0.1, "weight_decay_groups":'
                                ' [{"match": "^fc[12]\\\\.weight$", "weight_decay": 0.5}, {"match": "bias", "weight_decay": 0}]}}',
    "unknown-key.json": '{"name": "x", "optimiser": {}}',
    "wrong-type.json": '{"name": "x", "epochs": "2", "seed": -1}',
    "bad-name.json": '{"name": "../x"}',
    "not-object.json": '[1, 2]',
    "truncated.json": '{"name": "x", "optimizer": {"lr": 0.1',
    "big-numbers.json": '{"name": "x", "seed": 18446744073709551615, "epochs": 1e3, "optimizer": {"lr": 1e308}}',
}
for name, text in specs.items():
    write("fuzz_spec", name, text)
crashes = {  # issue 8; the regression tests are named in docs/reliability.md
    "crash-number-overflow.json": '{"name": "x", "epochs": 1e999}',
    "crash-deep-nesting.json": "[" * 200,
    "crash-long-name.json": '{"name": "%s"}' % ("a" * 4000),
    "crash-repeats-without-sweep.json": '{"name": "x", "repeats": 1000000000000}',
    "crash-seed-plus-repeat.json": '{"name": "x", "repeats": 2, "seed": 9223372036854775807}',
    "crash-batch-overflow.json": '{"name": "x", "batch": {"per_replica": 9223372036854775807}, "replicas": {"count": 2}}',
    "crash-narrowed-threads.json": '{"name": "x", "replicas": {"threads": 4294967297}}',
    "crash-wrapped-seed.json": '{"name": "x", "seed": 18446744073709551615}',
    "crash-nested-regex.json": '{"name": "x", "optimizer": {"weight_decay_groups": [{"match": "%s", "weight_decay": 0}]}}'
                               % ("(" * 300 + "a" + ")" * 300),
}
for name, text in crashes.items():
    write("fuzz_spec", name, text)

# fuzz_override: the document, then NUL-separated overrides.
overrides = {
    "global-batch": ['{"name": "x"}', 'replicas.count=4', 'batch={"global":64}'],
    "types": ['{"name": "x"}', 'optimizer.lr=0.5', 'optimizer.nesterov=true', 'optimizer.name=adam',
              'schedule.milestones=[10,20]', 'epochs=3'],
    "string-fallback": ['{"name": "x"}', 'a.b.c=hello world', 'a.d='],
    "sweep": ['{"name": "x"}', 'sweep.replicas.count=[1,2]', 'repeats=2'],
    "sync-groups": ['{"name": "x"}', 'replicas.sync={"local_sgd":{"period":2}}', 'replicas.count=2',
                    'optimizer.weight_decay_groups=[{"match":"fc","weight_decay":0.1}]', 'replicas.mode=simulated'],
    "malformed": ['', 'epochs', '=3', 'a..b=3', 'name.x=3'],
    "quickstart": [open(os.path.join(root, "experiments", "quickstart.json")).read(), 'epochs=2', 'replicas.count=2'],
    "crash-number-overflow": ['{"name": "x"}', 'optimizer.lr=1e999'],
    "crash-not-utf8": ['{"name": "x"}', 'name=\udcff'],
    "crash-deep-nesting": ['{"name": "x"}', 'a=' + "[" * 200],
}
for name, parts in overrides.items():
    write("fuzz_override", name, "\0".join(parts).encode("utf-8", "surrogateescape"))


# fuzz_idx: a mode byte (bit 0: a ".gz" file), then the file.
def idx(dims, data):
    return bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + bytes(data)


labels = idx([10], [i % 10 for i in range(10)])
images = idx([2, 4, 4], [(i * 7) % 256 for i in range(32)])
files = {
    "labels": labels,
    "images": images,
    "four-dims": idx([1, 2, 2, 2], range(8)),
    "truncated": images[:20],
    "trailing": labels + b"xyz",
    "bad-magic": b"\x01\x00\x08\x01\x00\x00\x00\x01\x05",
    "float-type": b"\x00\x00\x0d\x01\x00\x00\x00\x01\x05",
    "five-dims": b"\x00\x00\x08\x05",
    "zero-dim": b"\x00\x00\x08\x01\x00\x00\x00\x00",
    "huge-dims": b"\x00\x00\x08\x04" + b"\xff\xff\xff\xff" * 4,
    "empty": b"",
}
for name, data in files.items():
    write("fuzz_idx", "raw-" + name, b"\0" + data)
for name in ("labels", "images", "truncated", "trailing"):
    write("fuzz_idx", "gz-" + name, b"\1" + gzip.compress(files[name], mtime=0))
gz = gzip.compress(images, mtime=0)
write("fuzz_idx", "gz-cut", b"\1" + gz[: len(gz) // 2])
write("fuzz_idx", "gz-two-members", b"\1" + gzip.compress(images[:10], mtime=0) + gzip.compress(images[10:], mtime=0))
write("fuzz_idx", "gz-not-gzip", b"\1" + labels)


# Dictionaries (libFuzzer -dict): the schema's keys and enum values, JSON tokens, and for the
# overrides the dotted keys, so that mutations produce specs the schema recognizes.
def schema_words():
    import json
    with open(os.path.join(root, "lib", "ddplab", "config", "schema.json")) as f:
        schema = json.load(f)
    keys, dotted, values = set(), set(), set()

    def walk(node, prefix):
        for v in node.get("enum", []):
            if isinstance(v, str):
                values.add(v)
        for branch in node.get("oneOf", []) + ([node["items"]] if isinstance(node.get("items"), dict) else []):
            walk(branch, prefix)
        for key, sub in node.get("properties", {}).items():
            keys.add(key)
            dotted.add(prefix + key)
            walk(sub, prefix + key + ".")

    walk(schema, "")
    # model.name's enum is written into the schema at build time from the registry's X(name) lines.
    with open(os.path.join(root, "lib", "ddplab", "models", "models.cpp")) as f:
        values.update(re.findall(r"^  X\(([a-z0-9_]+)\)", f.read(), re.M))
    return sorted(keys), sorted(dotted), sorted(values)


def quoted(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


keys, dotted, values = schema_words()
tokens = ["{", "}", "[", "]", ":", ",", "true", "false", "null", "-1", "0", "1e308", "1e999", "0.5",
          "18446744073709551615", "9223372036854775807", "\\u0000", "\\ud800"]
spec_dict = [quoted('"%s":' % k) for k in keys] + [quoted('"%s"' % v) for v in values] + [quoted(t) for t in tokens]
override_dict = spec_dict + [quoted(d + "=") for d in dotted] + [quoted("."), quoted("="), "\"\\x00\""]
for target, lines in (("fuzz_spec", spec_dict), ("fuzz_override", override_dict)):
    with open(os.path.join(here, target + ".dict"), "w") as f:
        f.write("# Generated by make_corpus.py from lib/ddplab/config/schema.json.\n")
        f.write("\n".join(lines) + "\n")
