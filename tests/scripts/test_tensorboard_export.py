"""`ddplab export tensorboard` read back by TensorBoard itself (tensorboard==2.21.0).

ctest runs it (tests/CMakeLists.txt) with the project's venv, into which scripts/test.sh installs
tensorboard, and DDPLAB_BIN naming the built ddplab. It trains a small sweep with the real binary
(tiny MNIST-format data written here; batch.global 32 and 64, two seeds each, step records on),
exports it and reads every run with tensorboard's EventAccumulator: the exact number of scalar
events per tag (the loader drops a record with a bad CRC silently, so only exact counts catch
one), values equal to epochs.jsonl / steps.jsonl at float32 precision, steps equal to samples
seen, and the HParams session parsed with plugin_data_pb2 (group names equal to the report's
labels, status per run). A second test starts the `tensorboard` server on the export, on
127.0.0.1 at a free port, and asks its HParams endpoint for the session groups: a configuration's
seeds are one group whose metric is their mean. Without tensorboard the tests are skipped.
Run by hand: DDPLAB_BIN=build/bin/ddplab .venv/bin/python -m unittest tests/scripts/test_tensorboard_export.py
"""

import csv
import gzip
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request
from pathlib import Path

try:
    import numpy as np
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2
    HAVE_TENSORBOARD = True
except ImportError:
    HAVE_TENSORBOARD = False

REPO = Path(__file__).resolve().parents[2]
DDPLAB = os.environ.get("DDPLAB_BIN", str(REPO / "build" / "bin" / "ddplab"))

# epochs.jsonl field -> the tag it is exported as.
EPOCH_TAGS = {"train_loss": "train/loss", "train_acc": "train/acc", "test_loss": "test/loss",
              "test_acc": "test/acc", "lr": "lr", "images_per_s": "images_per_s",
              "comm_wait_s": "comm_wait_s", "comm_bytes": "comm_bytes",
              "grad_noise_scale": "grad_noise_scale", "epoch": "epoch"}
STEP_TAGS = {"train_loss": "steps/train_loss", "train_acc": "steps/train_acc", "lr": "steps/lr"}


def idx_bytes(shape, values):
    """An IDX file of unsigned bytes: magic, sizes (big-endian), data."""
    return struct.pack(">HBB", 0, 0x08, len(shape)) + struct.pack(f">{len(shape)}I", *shape) + bytes(values)


def write_mnist(directory, train=256, test=64):
    """MNIST-format files whose class c has a bright c-th band of rows (learnable)."""
    directory.mkdir(parents=True)
    for split, n in {"train": train, "t10k": test}.items():
        labels = [i % 10 for i in range(n)]
        pixels = bytearray()
        for label in labels:
            image = bytearray(28 * 28)
            for row in range(2 * label, 2 * label + 3):
                image[row * 28:(row + 1) * 28] = b"\xc8" * 28
            pixels += image
        (directory / f"{split}-images-idx3-ubyte.gz").write_bytes(gzip.compress(idx_bytes((n, 28, 28), pixels)))
        (directory / f"{split}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(idx_bytes((n,), labels)))


def read_jsonl(path):
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def ddplab(*args):
    result = subprocess.run([DDPLAB, *map(str, args)], capture_output=True, text=True, timeout=240)
    if result.returncode != 0:
        raise AssertionError(f"ddplab {' '.join(map(str, args))} exited {result.returncode}:\n"
                             f"{result.stdout}{result.stderr}")
    return result


@unittest.skipUnless(HAVE_TENSORBOARD, "tensorboard is not installed (scripts/test.sh installs tensorboard==2.21.0)")
class TensorBoardExport(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = Path(cls.tmp.name)
        write_mnist(root / "data")
        spec = {"name": "tb-sweep", "dataset": {"name": "idx", "root": str(root / "data")},
                "model": {"name": "mlp", "hidden": 16, "dropout": 0.0},
                "optimizer": {"name": "sgd", "lr": 0.05, "momentum": 0.9},
                "batch": {"global": 32}, "replicas": {"count": 1, "threads": 1},
                "epochs": 2, "seed": 1, "repeats": 2, "log": {"every_steps": 3},
                "sweep": {"batch.global": [32, 64]}, "output": str(root / "runs")}
        (root / "spec.json").write_text(json.dumps(spec))
        ddplab("run", root / "spec.json")
        ddplab("report", root / "runs" / "tb-sweep", "--out", root / "report")
        cls.export = ddplab("export", "tensorboard", root / "runs", "--out", root / "tb")
        cls.runs = sorted(p.parent for p in (root / "runs" / "tb-sweep").glob("*/manifest.json"))
        cls.out = root / "tb" / "tb-sweep"
        with open(root / "report" / "summary.csv", newline="") as f:
            cls.summary = list(csv.DictReader(f))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def accumulator(self, run):
        acc = event_accumulator.EventAccumulator(str(self.out / run.name), size_guidance={
            event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0})
        acc.Reload()
        return acc

    def test_sweep_was_exported(self):
        self.assertEqual(len(self.runs), 4, self.export.stdout)
        self.assertIn("4 runs exported", self.export.stdout)
        for run in self.runs:
            self.assertEqual(len(list((self.out / run.name).glob("events.out.tfevents.*"))), 1, run.name)

    def test_scalars_equal_the_records_at_samples_seen(self):
        for run in self.runs:
            acc = self.accumulator(run)
            epochs = read_jsonl(run / "epochs.jsonl")
            steps = read_jsonl(run / "steps.jsonl")
            self.assertEqual(len(epochs), 2, run.name)
            self.assertGreater(len(steps), 2, run.name)
            expected = {}
            for field, tag in EPOCH_TAGS.items():
                points = [(r["step"] * r["global_batch"], r[field]) for r in epochs if r.get(field) is not None]
                if points:
                    expected[tag] = points
            for field, tag in STEP_TAGS.items():
                expected[tag] = [(r["samples"], r[field]) for r in steps]
            self.assertEqual(set(acc.Tags()["scalars"]), set(expected), run.name)
            for tag, points in expected.items():
                events = acc.Scalars(tag)
                self.assertEqual(len(events), len(points), f"{run.name} {tag}")
                for event, (samples, value) in zip(events, points):
                    self.assertEqual(event.step, samples, f"{run.name} {tag}")
                    self.assertEqual(np.float32(event.value), np.float32(value), f"{run.name} {tag}")

    def test_hparams_sessions_group_seeds_by_the_reports_labels(self):
        label_of = {row["run_id"]: row["group"] for row in self.summary}
        groups = {}
        for run in self.runs:
            content = self.accumulator(run).PluginTagToContent("hparams")
            self.assertEqual(set(content), {"_hparams_/session_start_info", "_hparams_/session_end_info"})
            start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
            end = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_end_info"])
            self.assertEqual(start.version, 0)
            info = start.session_start_info
            spec = json.loads((run / "spec.json").read_text())
            manifest = json.loads((run / "manifest.json").read_text())
            self.assertEqual(info.group_name, label_of[manifest["run_id"]], run.name)
            self.assertEqual(set(info.hparams), {"batch.global", "seed"})
            self.assertEqual(info.hparams["batch.global"].number_value, spec["batch"]["global"])
            self.assertEqual(info.hparams["seed"].number_value, spec["seed"])
            self.assertEqual(manifest["status"], "done")
            self.assertEqual(end.session_end_info.status, api_pb2.STATUS_SUCCESS, run.name)
            groups.setdefault(info.group_name, set()).add(spec["seed"])
        self.assertEqual(groups, {"batch.global=32": {1, 2}, "batch.global=64": {1, 2}})

    def test_server_averages_a_configurations_seeds_in_one_session_group(self):
        groups = self.session_groups_from_server(expect_groups=2)
        runs_of = {}
        for run in self.runs:
            spec = json.loads((run / "spec.json").read_text())
            runs_of.setdefault(f"batch.global={spec['batch']['global']}", []).append(run)
        self.assertEqual(set(groups), set(runs_of))
        for name, group in groups.items():
            runs = runs_of[name]
            self.assertEqual(sorted(s["name"] for s in group["sessions"]),
                             sorted(f"tb-sweep/{run.name}" for run in runs), name)
            final = [np.float32(read_jsonl(run / "epochs.jsonl")[-1]["test_acc"]) for run in runs]
            values = {m["name"]["tag"]: m["value"] for m in group["metricValues"]}
            self.assertAlmostEqual(values["test/acc"], float(np.mean(final)), places=6, msg=name)

    def session_groups_from_server(self, expect_groups, timeout_s=60):
        """Starts tensorboard on the export (the Python loader: --load_fast=false) and returns its
        session groups by name, once it lists `expect_groups` of them (at most `timeout_s`)."""
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        tensorboard = Path(sys.executable).parent / "tensorboard"
        if not tensorboard.exists():
            self.skipTest(f"no {tensorboard} (the tensorboard package without its command)")
        server = subprocess.Popen([str(tensorboard), "--logdir", str(self.out.parent), "--host", "127.0.0.1",
                                   "--port", str(port), "--load_fast=false", "--reload_interval", "1"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        request = json.dumps({"experimentName": "", "startIndex": 0, "sliceSize": 100,
                              "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE",
                                                  "STATUS_RUNNING"],
                              "aggregationType": "AGGREGATION_AVG"}).encode()
        url = f"http://127.0.0.1:{port}/data/plugin/hparams/session_groups"
        groups, deadline = {}, time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline and server.poll() is None:
                try:
                    post = urllib.request.Request(url, data=request, headers={
                        "Content-Type": "application/json", "X-XSRF-Protected": "1"})
                    with urllib.request.urlopen(post, timeout=5) as response:
                        groups = {g["name"]: g for g in json.load(response).get("sessionGroups", [])}
                    if len(groups) == expect_groups and all(len(g["sessions"]) == 2 for g in groups.values()):
                        return groups
                except (urllib.error.URLError, ConnectionError):
                    pass  # not listening yet
                time.sleep(0.5)
        finally:
            server.terminate()
            try:
                _, err = server.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                _, err = server.communicate()
        self.fail(f"tensorboard on port {port} listed {sorted(groups)} in {timeout_s} s; its stderr:\n"
                  f"{err.decode(errors='replace')[-2000:]}")


@unittest.skipUnless(HAVE_TENSORBOARD, "tensorboard is not installed (scripts/test.sh installs tensorboard==2.21.0)")
class LiveTensorBoard(unittest.TestCase):
    """log.tensorboard: a run killed (SIGKILL) in epoch 2 of 3 and resumed; EventAccumulator reads
    its run directory: every tag's steps are the kept records' once, none twice."""

    def test_a_killed_and_resumed_run_holds_each_step_once(self):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            write_mnist(root / "data")
            spec = {"name": "live", "dataset": {"name": "idx", "root": str(root / "data")},
                    "model": {"name": "mlp", "hidden": 16, "dropout": 0.0},
                    "optimizer": {"name": "sgd", "lr": 0.05}, "batch": {"global": 32},
                    "replicas": {"count": 1, "threads": 1}, "epochs": 3, "seed": 1,
                    "log": {"every_steps": 3, "tensorboard": True},
                    "debug": {"fault": "crash", "rank": 0, "step": 12}, "output": str(root / "runs")}
            (root / "spec.json").write_text(json.dumps(spec))
            killed = subprocess.run([DDPLAB, "run", str(root / "spec.json")], capture_output=True, timeout=240)
            self.assertNotEqual(killed.returncode, 0)
            ddplab("run", root / "spec.json")
            run = root / "runs" / "live" / "seed=1"
            self.assertEqual(len(list(run.glob("events.out.tfevents.*"))), 1)
            acc = event_accumulator.EventAccumulator(str(run), size_guidance={event_accumulator.SCALARS: 0})
            acc.Reload()
            epochs, steps = read_jsonl(run / "epochs.jsonl"), read_jsonl(run / "steps.jsonl")
            self.assertEqual(len(epochs), 3)
            expected = {"train/loss": [r["step"] * r["global_batch"] for r in epochs],
                        "steps/train_loss": [r["samples"] for r in steps]}
            for tag, samples in expected.items():
                self.assertEqual([e.step for e in acc.Scalars(tag)], samples, tag)


if __name__ == "__main__":
    unittest.main()
