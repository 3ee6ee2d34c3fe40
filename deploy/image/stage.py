"""Stages the image's root file system from a pool of unpacked Debian packages.

Usage: python3 stage.py POOL STAGE VIDFORGE_BINARY HEALTHCHECK

POOL is `mmdebstrap --variant=extract` output: the packages of deploy/image/build.sh and their
dependencies, unpacked, no maintainer script run. STAGE gets only what vidforge loads:

- the binary (/usr/local/bin/vidforge) and every shared library it needs, found by the pool's
  own dynamic loader (`ld.so --list` with the pool's library directories first); a library
  found only outside the pool is an error, so nothing of the build host leaks in;
- the libraries loaded with dlopen: the Vulkan loader (wgpu), Mesa's lavapipe (the fallback
  adapter, with its ICD file) and what the NVIDIA driver's Vulkan ICD needs from the image when
  the NVIDIA container toolkit mounts the driver in (libglvnd's dispatcher, libX11, libXext);
- bash for the health check (deploy/image/healthcheck), the CA bundle (rustls reads the system
  roots: S3, OAuth issuers), the packages' copyright files, /etc/passwd with the non-root user
  vidforge (uid/gid 10001), /tmp and /data, and an ld.so.cache.

No shell utilities, no package manager, no docs, man pages or locales.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys

UID = 10001
ARCH_DIRS = ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu", "usr/lib", "lib")


def fail(why: str) -> None:
    print(f"stage: FAIL: {why}", file=sys.stderr)
    sys.exit(1)


def find_in_pool(pool: str, name: str) -> str:
    for d in ARCH_DIRS:
        p = os.path.join(pool, d, name)
        if os.path.lexists(p):
            return p
    fail(f"{name} is not in the pool: add its package to PACKAGES in deploy/image/build.sh")
    return ""


def lib_dirs(pool: str) -> list[str]:
    """The library directories, then their subdirectories with libraries: no maintainer script
    ran, so update-alternatives made no links (libblas.so.3 is only in .../blas/)."""
    dirs = [os.path.join(pool, d) for d in ARCH_DIRS]
    for d in ARCH_DIRS[:2]:
        for sub in sorted(glob.glob(os.path.join(pool, d, "*", "*.so.*"))):
            if os.path.dirname(sub) not in dirs:
                dirs.append(os.path.dirname(sub))
    return dirs


def needed(pool: str, loader: str, path: str) -> list[str]:
    """The pool paths of the shared libraries `path` loads, directly or not."""
    libpath = ":".join(lib_dirs(pool))
    out = subprocess.run([loader, "--library-path", libpath, "--list", path],
                         capture_output=True, text=True)
    if out.returncode != 0:
        fail(f"ld.so --list {path}: {out.stderr.strip() or out.stdout.strip()}")
    libs = []
    for line in out.stdout.splitlines():
        if "=>" not in line:
            continue
        name, _, rest = line.strip().partition(" => ")
        target = rest.rsplit(" (", 1)[0].strip()
        if target == "not found":
            fail(f"{path} needs {name}, which is in no package of the pool")
        if not os.path.abspath(target).startswith(os.path.abspath(pool) + os.sep):
            # An absolute RUNPATH (libpulse's) points at the host: take the pool's copy.
            if not os.path.exists(os.path.join(pool, target.lstrip("/"))):
                fail(f"{path} needs {name}, found only outside the pool ({target})")
            target = os.path.join(pool, target.lstrip("/"))
        libs.append(target)
    return libs


def copy_into(pool: str, stage: str, path: str) -> None:
    """Copies one pool path into the stage at the same place, symlink chain included."""
    while True:
        rel = os.path.relpath(path, pool)
        dest = os.path.join(stage, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        if os.path.islink(path):
            link = os.readlink(path)
            if not os.path.lexists(dest):
                os.symlink(link, dest)
            path = os.path.normpath(os.path.join(os.path.dirname(path), link)) \
                if not os.path.isabs(link) else os.path.join(pool, link.lstrip("/"))
            continue
        if not os.path.exists(dest):
            shutil.copy2(path, dest)
        return


def main(pool: str, stage: str, binary: str, healthcheck: str) -> None:
    loaders = glob.glob(os.path.join(pool, "lib64/ld-linux-x86-64.so.2")) + \
        glob.glob(os.path.join(pool, "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"))
    if not loaders:
        fail("no ld-linux-x86-64.so.2 in the pool")
    loader = loaders[0]

    os.makedirs(os.path.join(stage, "usr/local/bin"), exist_ok=True)
    shutil.copy2(binary, os.path.join(stage, "usr/local/bin/vidforge"))
    os.chmod(os.path.join(stage, "usr/local/bin/vidforge"), 0o755)
    shutil.copy2(healthcheck, os.path.join(stage, "usr/local/bin/vidforge-healthcheck"))
    os.chmod(os.path.join(stage, "usr/local/bin/vidforge-healthcheck"), 0o755)

    # Mesa's lavapipe, found through its ICD file (the only ICD the image ships).
    icd = os.path.join(pool, "usr/share/vulkan/icd.d/lvp_icd.x86_64.json")
    if not os.path.exists(icd):
        fail("no lavapipe ICD (mesa-vulkan-drivers) in the pool")
    lvp = json.load(open(icd))["ICD"]["library_path"]
    roots = [
        binary,
        find_in_pool(pool, "libvulkan.so.1"),
        os.path.join(pool, lvp.lstrip("/")),
        find_in_pool(pool, "libGLdispatch.so.0"),
        find_in_pool(pool, "libX11.so.6"),
        find_in_pool(pool, "libXext.so.6"),
    ]
    bash = next((p for p in (os.path.join(pool, "usr/bin/bash"), os.path.join(pool, "bin/bash"))
                 if os.path.exists(p)), None) or fail("no bash in the pool")
    roots.append(bash)

    files = set(roots[1:])
    for root in roots:
        files.update(needed(pool, loader, root))
    files.add(os.path.join(pool, "lib64/ld-linux-x86-64.so.2"))
    files.add(icd)
    for f in sorted(files):
        copy_into(pool, stage, f)
    if not os.path.exists(os.path.join(stage, "usr/bin/bash")):
        os.makedirs(os.path.join(stage, "usr/bin"), exist_ok=True)
        os.symlink(os.path.join("/", os.path.relpath(bash, pool)), os.path.join(stage, "usr/bin/bash"))
    print(f"stage: vidforge, bash and {len(files) - 2} files they load (libraries, lavapipe, its ICD)")

    # The CA bundle, as update-ca-certificates makes it (Mozilla's roots, PEM, concatenated).
    certs = sorted(glob.glob(os.path.join(pool, "usr/share/ca-certificates/mozilla/*.crt")))
    if not certs:
        fail("no CA certificates in the pool (ca-certificates)")
    os.makedirs(os.path.join(stage, "etc/ssl/certs"), exist_ok=True)
    with open(os.path.join(stage, "etc/ssl/certs/ca-certificates.crt"), "w") as out:
        for c in certs:
            text = open(c).read()
            out.write(text if text.endswith("\n") else text + "\n")

    # Licences: the copyright file of every package in the pool (a superset of those shipped).
    for c in glob.glob(os.path.join(pool, "usr/share/doc/*/copyright")):
        copy_into(pool, stage, c)

    etc = os.path.join(stage, "etc")
    with open(os.path.join(etc, "passwd"), "w") as f:
        f.write(f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
                f"vidforge:x:{UID}:{UID}:vidforge:/data:/usr/sbin/nologin\n")
    with open(os.path.join(etc, "group"), "w") as f:
        f.write(f"root:x:0:\nvidforge:x:{UID}:\n")
    with open(os.path.join(etc, "nsswitch.conf"), "w") as f:
        f.write("passwd: files\ngroup: files\nhosts: files dns\n")
    with open(os.path.join(etc, "ld.so.conf"), "w") as f:
        f.write("include /etc/ld.so.conf.d/*.conf\n")
    os.makedirs(os.path.join(etc, "ld.so.conf.d"), exist_ok=True)
    with open(os.path.join(etc, "ld.so.conf.d/x86_64-linux-gnu.conf"), "w") as f:
        shipped = sorted({os.path.dirname(os.path.relpath(f, pool)) for f in files
                          if ".so" in os.path.basename(f)})
        extra = [d for d in shipped if d not in ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu")]
        f.write("".join(f"/{d}\n" for d in ["lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu"] + extra))
    for d, mode in (("tmp", 0o1777), ("data", 0o750), ("root", 0o700)):
        os.makedirs(os.path.join(stage, d), exist_ok=True)
        os.chmod(os.path.join(stage, d), mode)
    subprocess.run(["ldconfig", "-r", stage], check=True)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(*sys.argv[1:])
