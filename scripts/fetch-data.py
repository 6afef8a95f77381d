#!/usr/bin/env python3
"""Downloads a dataset ddplab reads into the directory its loader looks in (data/README.md).

    scripts/fetch-data.py mnist|cifar10|cifar100 [--root data] [--mirror URL] [--checksums FILE]

mnist     the four MNIST IDX files, kept gzipped (ddplab reads them so): <root>/mnist/*-ubyte.gz
cifar10   the CIFAR-10 binary tarball, unpacked:  <root>/cifar-10-batches-bin/
cifar100  the CIFAR-100 binary tarball, unpacked: <root>/cifar-100-binary/

Every file is checked against its published MD5 before anything appears under <root>: the
download and the unpacking happen in a temporary directory beside the target, which is renamed
into place only when it is complete, so a failure (no network, an HTTP error, a checksum
mismatch, a full disk, Ctrl-C) leaves nothing behind. A dataset that is already complete is left
alone. --mirror replaces the base URL the files are fetched from; --checksums FILE (lines
"<md5>  <file name>", as md5sum writes them) replaces the built-in checksums, for the tests
(tests/scripts/test_fetch_data.py) and for mirrors that serve other copies.

Exit status: 0 the dataset is in place, 1 it could not be fetched, 2 a usage error.
Python 3 standard library only.
"""

import argparse
import errno
import hashlib
import http.client
import os
import shutil
import socket
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

# MNIST: the checksums torchvision verifies (torchvision/datasets/mnist.py, MNIST.resources) and
# the mirror it falls back to (MNIST.mirrors; yann.lecun.com, its first, no longer serves them).
MNIST_MIRROR = "https://ossci-datasets.s3.amazonaws.com/mnist/"
# CIFAR: the official site and the md5sums its download table lists for the binary versions
# (https://www.cs.toronto.edu/~kriz/cifar.html; torchvision's cifar.py fetches the Python
# versions, whose checksums differ).
CIFAR_MIRROR = "https://www.cs.toronto.edu/~kriz/"


@dataclass(frozen=True)
class Dataset:
    directory: str  # under --root; the loader's default dataset.root (config::default_root)
    mirror: str
    downloads: dict  # file name -> md5
    archive: bool  # a tarball that unpacks to `directory`, or files stored in `directory` as they are
    files: tuple  # what a complete `directory` holds
    size_mb: int  # download size, for the message


DATASETS = {
    "mnist": Dataset(
        "mnist", MNIST_MIRROR,
        {"train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
         "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
         "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
         "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c"},
        archive=False,
        files=("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
               "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
        size_mb=12),
    "cifar10": Dataset(
        "cifar-10-batches-bin", CIFAR_MIRROR,
        {"cifar-10-binary.tar.gz": "c32a1d4ab5d03f1284b67883e8d87530"},
        archive=True,
        files=tuple(f"data_batch_{i}.bin" for i in range(1, 6)) + ("test_batch.bin",),
        size_mb=162),
    "cifar100": Dataset(
        "cifar-100-binary", CIFAR_MIRROR,
        {"cifar-100-binary.tar.gz": "03b5dce01913d631647c71ecec9e9cb8"},
        archive=True,
        files=("train.bin", "test.bin"),
        size_mb=161),
}

CHUNK = 1 << 20
TIMEOUT_S = 60


class Failure(Exception):
    """A fetch that failed (exit 1); the message says what and where."""


class UsageError(Exception):
    """Bad arguments or inputs (exit 2)."""


def log(message):
    print(f"fetch-data: {message}", file=sys.stderr, flush=True)


def read_checksums(path):
    """{file name: md5} from lines "<md5>  <name>" (md5sum's format; "*name" and blank lines too)."""
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise UsageError(f"--checksums {path}: cannot read it ({e.strerror})") from None
    sums = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        digest = parts[0].lower()
        if len(parts) != 2 or len(digest) != 32 or any(c not in "0123456789abcdef" for c in digest):
            raise UsageError(f"--checksums {path}:{number}: expected \"<32 hex digits>  <file name>\", got {line!r}")
        sums[parts[1].strip().lstrip("*")] = digest
    return sums


def describe_url_error(url, error):
    if isinstance(error, urllib.error.HTTPError):
        return f"{url}: HTTP {error.code} {error.reason} (wrong --mirror, or the file moved?)"
    reason = getattr(error, "reason", error)
    return (f"{url}: cannot reach the server ({reason}); no network, or the server is down "
            f"(try again later or name another with --mirror)")


def download(url, dest, expected_md5):
    """Streams url into dest and checks its MD5; raises Failure naming the file on any error."""
    md5 = hashlib.md5()
    received = 0
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response, open(dest, "wb") as out:
            length = response.headers.get("Content-Length")
            while True:
                chunk = response.read(CHUNK)
                if not chunk:
                    break
                out.write(chunk)
                md5.update(chunk)
                received += len(chunk)
    except (urllib.error.URLError, socket.timeout, ConnectionError, http.client.HTTPException) as e:
        raise Failure(describe_url_error(url, e)) from None
    if length is not None and length.isdigit() and received != int(length):
        raise Failure(f"{url}: the download stopped after {received} of {length} bytes; try again")
    got = md5.hexdigest()
    if got != expected_md5:
        raise Failure(f"{dest.name}: checksum mismatch: expected md5 {expected_md5}, got {got} "
                      f"({received} bytes from {url}; a broken download, or a mirror with other files)")
    log(f"{dest.name}: {received} bytes, md5 {got} ok")


def unpack(archive, into, dataset):
    """Unpacks the tarball into `into`, refusing members that would land outside it."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar.getmembers():
                name = Path(member.name)
                if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir()):
                    raise Failure(f"{archive.name}: unexpected member {member.name!r} (not a plain file "
                                  f"under {dataset.directory}/); refusing to unpack it")
            if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: also refuse odd modes and owners
                tar.extractall(into, filter="data")
            else:
                tar.extractall(into)
    except (tarfile.TarError, EOFError) as e:
        raise Failure(f"{archive.name}: not a readable .tar.gz ({e})") from None


def missing_files(directory, dataset):
    return [name for name in dataset.files if not (directory / name).is_file()]


def fetch_into(staging, dataset, mirror, sums):
    """Downloads (and unpacks) into staging; returns the complete dataset directory inside it."""
    downloads = staging / "downloads"
    downloads.mkdir()
    for name in dataset.downloads:
        log(f"downloading {mirror}{name}")
        download(f"{mirror}{name}", downloads / name, sums[name])
    if not dataset.archive:
        return downloads
    unpacked = staging / "unpacked"
    unpacked.mkdir()
    for name in dataset.downloads:
        unpack(downloads / name, unpacked, dataset)
    result = unpacked / dataset.directory
    lacking = missing_files(result, dataset)
    if lacking:
        raise Failure(f"{', '.join(dataset.downloads)} unpacked without {dataset.directory}/{lacking[0]} "
                      f"(expected {', '.join(dataset.files)}): not the binary version?")
    return result


def fetch(name, root, mirror=None, checksums=None):
    """Puts dataset `name` into root/<its directory>; returns a line saying what happened."""
    dataset = DATASETS[name]
    target = root / dataset.directory
    if target.exists():
        lacking = missing_files(target, dataset)
        if not lacking:
            return f"{name} is already in {target}; left alone"
        raise Failure(f"{target} exists but lacks {', '.join(lacking)}; it was left alone: move it away "
                      f"or delete it, then run this again")
    mirror = mirror or dataset.mirror
    if not mirror.endswith("/"):
        mirror += "/"
    sums = dict(dataset.downloads)
    if checksums is not None:
        override = read_checksums(checksums)
        unknown = [n for n in sums if n not in override]
        if unknown:
            raise UsageError(f"--checksums {checksums}: no checksum for {', '.join(unknown)}")
        sums = {n: override[n] for n in sums}
    made_root = not root.exists()
    left = f"; {target} was not created, nothing was left behind"
    try:
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{dataset.directory}.partial-", dir=root))
    except OSError as e:
        raise Failure(describe_os_error(e, root) + left) from None
    try:
        log(f"fetching {name} (about {dataset.size_mb} MB) into {target} via {staging.name}/")
        result = fetch_into(staging, dataset, mirror, sums)
        os.rename(result, target)
    except OSError as e:
        raise Failure(describe_os_error(e, target) + left) from None
    except Failure as e:
        raise Failure(f"{e}{left}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if made_root and not target.exists():
            try:
                root.rmdir()
            except OSError:
                pass
    files = sorted(p for p in target.iterdir() if p.is_file())
    total = sum(p.stat().st_size for p in files)
    return f"{name} is ready in {target} ({len(files)} files, {total / 1e6:.1f} MB)"


def describe_os_error(error, where):
    if error.errno == errno.ENOSPC:
        return (f"the disk is full (writing {error.filename or where}): free some space, or use --root "
                f"on another disk")
    if error.errno in (errno.EEXIST, errno.ENOTEMPTY):
        return f"{where} appeared while fetching (another fetch-data running?); nothing was changed"
    return f"{error.filename or where}: {error.strerror or error}"


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="fetch-data.py", description="Download a dataset where ddplab's loaders look (data/README.md).")
    parser.add_argument("dataset", choices=sorted(DATASETS), help="which dataset")
    parser.add_argument("--root", default="data", type=Path,
                        help="directory that receives the dataset's directory (default: data)")
    parser.add_argument("--mirror", help="base URL to fetch the files from (default: the official one)")
    parser.add_argument("--checksums", metavar="FILE",
                        help="md5sum-style file replacing the built-in checksums (tests, other mirrors)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)  # exits 2 on a usage error
    try:
        log(fetch(args.dataset, args.root, args.mirror, args.checksums))
        return 0
    except UsageError as e:
        log(f"error: {e}")
        return 2
    except Failure as e:
        log(f"failed: {e}")
        return 1
    except KeyboardInterrupt:
        log("interrupted; nothing was left behind")
        return 130


if __name__ == "__main__":
    sys.exit(main())
