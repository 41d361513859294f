"""setup.py: the Python package with libtilescope and the tilescope program inside it (pyproject.toml).

The package itself is ctypes over the library, so nothing here compiles a Python extension: the build step
runs CMake on this tree and copies the two files the package loads and runs into tilescope/_bin/, with an
_install_paths.py that points the package at them (python/tilescope/_lib.py reads it, as it reads the one
`cmake --install` writes). Settings, all optional (environment variables, since pip passes no options
through to a build backend in a way every pip version understands):
  TILESCOPE_BUILD_DIR   a CMake build folder to build in and take the files from (configured here when it
                        has no CMakeCache.txt); default: build-pip/cmake beside this file
  TILESCOPE_CMAKE_ARGS  extra arguments for the configure step (e.g. -DTSC_WITH_CUDA=OFF), shell-quoted
  TILESCOPE_PIP_BUILD   setuptools' own build and metadata folder; default: build-pip beside this file
"""
import os
import re
import shlex
import shutil

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_BASE = os.path.abspath(os.environ.get("TILESCOPE_PIP_BUILD") or os.path.join(HERE, "build-pip"))
# What the package needs at run time, as the build names them (the library is the versioned file behind
# the libtilescope.so link; ctypes loads it by path, so its soname needs no link in the wheel).
BUILT_FILES = ("libtilescope.so", "tilescope")


def cmake_version():
    """project(tilescope VERSION x.y.z) of CMakeLists.txt: the library's version is the package's."""
    with open(os.path.join(HERE, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(tilescope\s+VERSION\s+([0-9][0-9.]*)", f.read())
    if not m:
        raise RuntimeError("CMakeLists.txt: no 'project(tilescope VERSION x.y.z)' line to take the version from")
    return m.group(1)


class build_py_cmake(build_py):
    """build_py, then libtilescope.so and tilescope built by CMake into tilescope/_bin/."""

    def run(self):
        super().run()
        bdir = os.path.abspath(os.environ.get("TILESCOPE_BUILD_DIR") or os.path.join(BUILD_BASE, "cmake"))
        if not os.path.exists(os.path.join(bdir, "CMakeCache.txt")):
            self.spawn(["cmake", "-S", HERE, "-B", bdir, "-DCMAKE_BUILD_TYPE=Release"]
                       + shlex.split(os.environ.get("TILESCOPE_CMAKE_ARGS", "")))
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 2)
        # only the two targets the package ships: the tests and tools of a full build are not needed
        self.spawn(["cmake", "--build", bdir, "--target", "tilescope", "tilescope_shared", "-j", jobs])
        dest = os.path.join(self.build_lib, "tilescope", "_bin")
        os.makedirs(dest, exist_ok=True)
        for name in BUILT_FILES:
            src = os.path.realpath(os.path.join(bdir, name))
            if not os.path.isfile(src):
                raise RuntimeError("%s: the CMake build made no %s" % (bdir, name))
            shutil.copy2(src, os.path.join(dest, name))  # copy2 keeps the program's executable bit
        with open(os.path.join(self.build_lib, "tilescope", "_install_paths.py"), "w", encoding="utf-8") as f:
            f.write("# written by setup.py: the library's and the program's folder, relative to this file\n"
                    'LIBDIR = "_bin"\nBINDIR = "_bin"\n')


class BinaryDistribution(Distribution):
    """Holds machine code: built per platform, installed into platlib."""

    def has_ext_modules(self):
        return True


cmdclass = {"build_py": build_py_cmake}
try:
    from wheel.bdist_wheel import bdist_wheel

    class bdist_wheel_platform(bdist_wheel):
        """The wheel holds machine code (the library and the program) but no Python extension: tagged for
        this platform and any Python 3, not as pure Python."""

        def get_tag(self):
            return ("py3", "none", super().get_tag()[2])

    cmdclass["bdist_wheel"] = bdist_wheel_platform
except ImportError:  # no wheel package: `pip install` needs it (python3-wheel), `setup.py build` does not
    pass

# setuptools' build and metadata folders out of the source tree's way (build/ is CMake's by convention here)
os.makedirs(BUILD_BASE, exist_ok=True)
setup(
    version=cmake_version(),
    packages=["tilescope"],
    package_dir={"": "python"},
    cmdclass=cmdclass,
    distclass=BinaryDistribution,
    options={"build": {"build_base": BUILD_BASE}, "egg_info": {"egg_base": BUILD_BASE}},
    zip_safe=False,  # the library and the program are loaded and run from files
)
