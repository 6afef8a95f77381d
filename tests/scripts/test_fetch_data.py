"""scripts/fetch-data.py against a loopback HTTP server that serves tiny files in the real formats.

ctest runs it (tests/CMakeLists.txt) with DDPLAB_BIN naming the built ddplab: a fetched dataset
then trains one epoch from where the loader looks by default (data/... under the working
directory). Run by hand: python3 -m unittest tests/scripts/test_fetch_data.py
"""

import contextlib
import errno
import functools
import gzip
import hashlib
import http.server
import importlib.util
import io
import json
import os
import socket
import struct
import subprocess
import sys
import tarfile
import tempfile
import threading
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "fetch-data.py"
MNIST_FILES = ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
               "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")


def idx_bytes(shape, values):
    """An IDX file of unsigned bytes: magic, sizes (big-endian), data."""
    return struct.pack(">HBB", 0, 0x08, len(shape)) + struct.pack(f">{len(shape)}I", *shape) + bytes(values)


def write_mnist(directory, train=64, test=16):
    directory.mkdir(parents=True)
    parts = {"train": train, "t10k": test}
    for split, n in parts.items():
        images = idx_bytes((n, 28, 28), ((i * 7) % 256 for i in range(n * 28 * 28)))
        labels = idx_bytes((n,), (i % 10 for i in range(n)))
        (directory / f"{split}-images-idx3-ubyte.gz").write_bytes(gzip.compress(images))
        (directory / f"{split}-labels-idx1-ubyte.gz").write_bytes(gzip.compress(labels))


def cifar_records(n, classes, coarse):
    out = bytearray()
    for i in range(n):
        if coarse:
            out.append(i % 20)
        out.append(i % classes)
        out += bytes((i + j) % 256 for j in range(3072))
    return bytes(out)


def write_cifar_tarball(path, top, members):
    """A .tar.gz holding top/<name> for each (name, bytes) member, as the official tarballs do."""
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo(top)
        info.type = tarfile.DIRTYPE
        info.mode = 0o755
        tar.addfile(info)
        for name, data in members:
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(data))


def md5_of(path):
    return hashlib.md5(path.read_bytes()).hexdigest()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class Server:
    """http.server on 127.0.0.1 (a free port) serving `directory` from a background thread."""

    def __init__(self, directory):
        handler = functools.partial(QuietHandler, directory=str(directory))
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def free_port_url():
    """A loopback URL nobody listens on: a port just bound and released."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


def ddplab_bin():
    path = os.environ.get("DDPLAB_BIN") or str(REPO / "build" / "bin" / "ddplab")
    return path if os.access(path, os.X_OK) else None


class FetchDataTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="fetch-data-test-")
        self.work = Path(self.tmp.name)
        self.served = self.work / "served"
        self.served.mkdir()
        self.root = self.work / "data"
        self.server = Server(self.served)
        self.addCleanup(self.tmp.cleanup)
        self.addCleanup(self.server.close)

    def serve_mnist(self):
        write_mnist(self.served / "mnist")
        return self.server.url + "mnist/", self.checksums(self.served / "mnist", MNIST_FILES)

    def serve_cifar(self, dataset):
        if dataset == "cifar10":
            top, tarball = "cifar-10-batches-bin", "cifar-10-binary.tar.gz"
            members = [(f"data_batch_{i}.bin", cifar_records(16, 10, False)) for i in range(1, 6)]
            members += [("test_batch.bin", cifar_records(16, 10, False)), ("batches.meta.txt", b"airplane\n")]
        else:
            top, tarball = "cifar-100-binary", "cifar-100-binary.tar.gz"
            members = [("train.bin", cifar_records(64, 100, True)), ("test.bin", cifar_records(16, 100, True))]
        write_cifar_tarball(self.served / tarball, top, members)
        return self.server.url, self.checksums(self.served, (tarball,)), top

    def checksums(self, directory, names, wrong=()):
        path = self.work / f"checksums-{len(list(self.work.glob('checksums-*')))}.md5"
        lines = [f"{'0' * 32 if n in wrong else md5_of(directory / n)}  {n}" for n in names]
        path.write_text("\n".join(lines) + "\n")
        return path

    def fetch(self, *args):
        return subprocess.run([sys.executable, str(SCRIPT), *args, "--root", str(self.root)],
                              capture_output=True, text=True, timeout=60)

    def assert_nothing_left(self):
        leftovers = list(self.root.iterdir()) if self.root.exists() else []
        self.assertEqual(leftovers, [], "a failed fetch must leave nothing behind")

    def train_one_epoch(self, dataset, model):
        """Trains from data/... under self.work, the loader's default root; skipped without ddplab."""
        binary = ddplab_bin()
        if binary is None:
            self.skipTest("no built ddplab (set DDPLAB_BIN); the layout alone was checked")
        spec = {"name": f"fetched_{dataset}", "dataset": {"name": dataset},
                "model": {"name": model, "hidden": 16, "dropout": 0.0},
                "optimizer": {"name": "sgd", "lr": 0.05}, "batch": {"global": 16},
                "replicas": {"count": 1, "threads": 1, "timeout_s": 30}, "epochs": 1, "seed": 1,
                "output": str(self.work / "runs")}
        (self.work / "spec.json").write_text(json.dumps(spec))
        run = subprocess.run([binary, "run", "spec.json"], cwd=self.work, capture_output=True, text=True,
                             timeout=120)
        # One epoch of a few images may end at chance: "collapsed" (exit code 4) is a finished run too.
        self.assertIn(run.returncode, (0, 4), run.stdout + run.stderr)
        log = (self.work / "runs" / f"fetched_{dataset}" / "seed=1" / "epochs.jsonl").read_text()
        self.assertEqual(len(log.splitlines()), 1, log)

    def test_mnist_lands_where_the_loader_looks_and_trains(self):
        mirror, sums = self.serve_mnist()
        result = self.fetch("mnist", "--mirror", mirror, "--checksums", str(sums))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("ready in", result.stderr)
        self.assertEqual(sorted(p.name for p in self.root.iterdir()), ["mnist"])
        self.assertEqual(sorted(p.name for p in (self.root / "mnist").iterdir()), sorted(MNIST_FILES))
        for name in MNIST_FILES:  # kept gzipped, byte for byte as served
            self.assertEqual((self.root / "mnist" / name).read_bytes(), (self.served / "mnist" / name).read_bytes())
        self.train_one_epoch("mnist", "mlp")

    def test_cifar10_unpacks_to_its_default_root_and_trains(self):
        mirror, sums, top = self.serve_cifar("cifar10")
        result = self.fetch("cifar10", "--mirror", mirror, "--checksums", str(sums))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(sorted(p.name for p in self.root.iterdir()), [top])  # no tarball, no temp dir
        names = {p.name for p in (self.root / top).iterdir()}
        self.assertTrue({f"data_batch_{i}.bin" for i in range(1, 6)} | {"test_batch.bin"} <= names, names)
        self.train_one_epoch("cifar10", "mlp")

    def test_cifar100_unpacks_to_its_default_root(self):
        mirror, sums, top = self.serve_cifar("cifar100")
        result = self.fetch("cifar100", "--mirror", mirror, "--checksums", str(sums))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(sorted(p.name for p in (self.root / top).iterdir()), ["test.bin", "train.bin"])
        self.assertEqual((self.root / top / "train.bin").stat().st_size, 64 * 3074)

    def test_wrong_checksum_names_the_file_and_leaves_nothing(self):
        mirror, _ = self.serve_mnist()
        sums = self.checksums(self.served / "mnist", MNIST_FILES, wrong=("t10k-images-idx3-ubyte.gz",))
        result = self.fetch("mnist", "--mirror", mirror, "--checksums", str(sums))
        self.assertEqual(result.returncode, 1, result.stderr)
        got = md5_of(self.served / "mnist" / "t10k-images-idx3-ubyte.gz")
        self.assertIn(f"t10k-images-idx3-ubyte.gz: checksum mismatch: expected md5 {'0' * 32}, got {got}",
                      result.stderr)
        self.assert_nothing_left()

    def test_builtin_checksums_reject_other_files(self):
        mirror, _ = self.serve_mnist()  # the tiny files are not the official ones
        result = self.fetch("mnist", "--mirror", mirror)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("expected md5 f68b3c2dcbeaaa9fbdd348bbdeb94873", result.stderr)
        self.assert_nothing_left()

    def test_http_404_says_so_and_leaves_nothing(self):
        _, sums, _ = self.serve_cifar("cifar10")
        result = self.fetch("cifar10", "--mirror", self.server.url + "nowhere/", "--checksums", str(sums))
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("nowhere/cifar-10-binary.tar.gz: HTTP 404", result.stderr)
        self.assert_nothing_left()

    def test_server_down_says_so_and_leaves_nothing(self):
        _, sums = self.serve_mnist()
        result = self.fetch("mnist", "--mirror", free_port_url(), "--checksums", str(sums))
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("cannot reach the server", result.stderr)
        self.assertFalse(self.root.exists(), "a --root it made must go again")

    def test_dataset_already_present_is_left_alone(self):
        write_mnist(self.root / "mnist", train=8, test=8)
        before = {p.name: p.read_bytes() for p in (self.root / "mnist").iterdir()}
        result = self.fetch("mnist", "--mirror", free_port_url())  # would fail if it downloaded
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("already in", result.stderr)
        self.assertEqual({p.name: p.read_bytes() for p in (self.root / "mnist").iterdir()}, before)

    def test_incomplete_existing_dataset_is_an_error_and_kept(self):
        (self.root / "cifar-10-batches-bin").mkdir(parents=True)
        (self.root / "cifar-10-batches-bin" / "data_batch_1.bin").write_bytes(b"x")
        result = self.fetch("cifar10", "--mirror", free_port_url())
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("exists but lacks data_batch_2.bin", result.stderr)
        self.assertEqual((self.root / "cifar-10-batches-bin" / "data_batch_1.bin").read_bytes(), b"x")

    def test_usage_errors_exit_2(self):
        self.assertEqual(self.fetch("imagenet").returncode, 2)
        bad = self.work / "bad.md5"
        bad.write_text("not-a-checksum  train-images-idx3-ubyte.gz\n")
        result = self.fetch("mnist", "--checksums", str(bad))
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("bad.md5:1", result.stderr)
        self.assert_nothing_left()

    def test_full_disk_says_so_and_leaves_nothing(self):
        mirror, sums = self.serve_mnist()
        spec = importlib.util.spec_from_file_location("fetch_data", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)

        class FullDisk(io.FileIO):
            def write(self, data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self.name)

        module.open = lambda path, mode: FullDisk(path, mode) if "w" in mode else open(path, mode)
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            rc = module.main(["mnist", "--root", str(self.root), "--mirror", mirror, "--checksums", str(sums)])
        self.assertEqual(rc, 1, stderr.getvalue())
        self.assertIn("the disk is full (writing ", stderr.getvalue())
        self.assertIn("train-images-idx3-ubyte.gz", stderr.getvalue())
        self.assert_nothing_left()


if __name__ == "__main__":
    unittest.main()
