"""Builds and installs janus (Python) and janus_ops (the compiled op library).

The distribution is ``janus-tf`` (``janus`` on the package index is another
project); the import name is ``janus``.  Install, after tensorflow-cpu==2.21.0,
setuptools>=64 and wheel are installed in the same environment:

    pip install --no-build-isolation .       # or -e . for a development checkout

The op library (janus_ops/_janus_ops.so) is compiled with g++ against the
TensorFlow that the build's Python imports, and a .so built against one
TensorFlow must not be loaded into another.  --no-build-isolation makes the
build use this environment's TensorFlow, the one janus will run with; an
isolated build would see no TensorFlow (or a different one) and stops with a
message saying so.  The TF version is written to janus_ops/_build_info.txt
and checked at load time by janus/graph/ops.py.
"""

import json
import os
import shlex
import subprocess
import sys
import sysconfig

from setuptools import Extension, find_namespace_packages, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import SetupError

TF_REQUIREMENT = 'tensorflow-cpu==2.21.0'
OPS_SOURCES = ['janus_ops/assert_op.cc', 'janus_ops/heap_ops.cc', 'janus_ops/invoke_op.cc']
BUILD_INFO_NAME = '_build_info.txt'

_NO_TF_MESSAGE = (
    'TensorFlow is not importable by this build (%s). The op library is '
    'compiled against the TensorFlow of the target environment: install %s '
    'there first, then run `pip install --no-build-isolation .` (add -e for '
    'an editable install); without --no-build-isolation, pip hides the '
    "environment's packages from the build.")

# Prints what the build needs from TensorFlow, as JSON, in a child Python:
# importing TF in setup.py itself would make every pip call (metadata too) slow.
_TF_QUERY = (
    'import json, tensorflow as tf; print(json.dumps({'
    '"version": tf.__version__, '
    '"compile": tf.sysconfig.get_compile_flags(), '
    '"link": tf.sysconfig.get_link_flags()}))')


def tensorflow_build_config():
    """Returns {version, compile, link} of the TF this Python imports."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
    proc = subprocess.run([sys.executable, '-c', _TF_QUERY], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ['no output'])[-1]
        raise SetupError(_NO_TF_MESSAGE % (reason, TF_REQUIREMENT))
    return json.loads(proc.stdout.strip().splitlines()[-1])


class BuildTFOps(build_ext):
    """Compiles each extension with g++ and TF's flags, not distutils' own.

    The extension machinery is kept (rather than a build_py hook) so wheels
    are tagged for this platform and editable installs copy the .so next to
    the sources (setuptools' build_ext in-place mode).
    """

    def get_ext_filename(self, fullname):
        # tf.load_op_library wants a plain name, not the CPython ABI suffix.
        return os.path.join(*fullname.split('.')) + '.so'

    def build_extension(self, ext):
        config = tensorflow_build_config()
        output = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(output), exist_ok=True)
        self._compile(ext.sources, output, config)
        _write_build_info(os.path.dirname(output), config)

    def _compile(self, sources, output, config):
        command = (
            shlex.split(os.environ.get('CXX', 'g++'))
            + ['-shared', '-fPIC', '-O2',
               # TF's own headers trigger these by the hundred on g++ 12.
               '-Wno-deprecated-declarations', '-Wno-interference-size']
            + config['compile'] + ['-I' + _python_include()]
            + list(sources) + ['-o', output]
            + config['link'])
        print('compiling Janus ops against TensorFlow %s: %s'
              % (config['version'], ' '.join(command)))
        try:
            subprocess.check_call(command)
        except FileNotFoundError:
            raise SetupError('C++ compiler %r not found: install g++ or set '
                             'CXX.' % command[0]) from None
        except subprocess.CalledProcessError:
            raise SetupError('compiling the Janus ops failed; the compiler '
                             'output is above.') from None

    def copy_extensions_to_source(self):
        # In-place/editable builds: the build info must follow the .so.
        super().copy_extensions_to_source()
        for regular, inplace in self._build_info_mapping():
            self.copy_file(regular, inplace, level=self.verbose)

    def get_outputs(self):
        return super().get_outputs() + [
            inplace if self.inplace else regular
            for regular, inplace in self._build_info_mapping()]

    def get_output_mapping(self):
        mapping = super().get_output_mapping()
        if self.inplace:
            mapping.update(self._build_info_mapping())
        return mapping

    def _build_info_mapping(self):
        """Yields (built, in-source) paths of each extension's build info."""
        # As setuptools' _get_inplace_equivalent: get_ext_fullpath would
        # already answer the in-source path while self.inplace is set.
        build_py = self.get_finalized_command('build_py')
        for ext in self.extensions:
            built = os.path.join(self.build_lib, self.get_ext_filename(ext.name))
            package = ext.name.rpartition('.')[0]
            yield (os.path.join(os.path.dirname(built), BUILD_INFO_NAME),
                   os.path.join(build_py.get_package_dir(package),
                                BUILD_INFO_NAME))


def _python_include():
    """Python.h's folder: the heap ops call back into Python (heap_ops.cc).

    Not linked against libpython: like any extension module, the library
    takes the Py* symbols from the interpreter that loads it.
    """
    include = sysconfig.get_paths()['include']
    if not os.path.isfile(os.path.join(include, 'Python.h')):
        raise SetupError('Python.h not found in %s: install the Python '
                         'development headers (e.g. python3-dev).' % include)
    return include


def _write_build_info(directory, config):
    with open(os.path.join(directory, BUILD_INFO_NAME), 'w') as f:
        f.write('tensorflow_version=%s\n' % config['version'])
        f.write('compile_flags=%s\n' % ' '.join(config['compile']))


HERE = os.path.dirname(os.path.abspath(__file__))


def _long_description():
    with open(os.path.join(HERE, 'README.md'), encoding='utf-8') as f:
        return f.read()


setup(
    # The import name stays `janus`; the distribution is `janus-tf`, since
    # `janus` on the package index is an unrelated asyncio queue library.
    name='janus-tf',
    version='0.1.0',
    description='Speculative graph generation for imperative TensorFlow 2 '
                'programs (JANUS, NSDI 2019).',
    long_description=_long_description(),
    long_description_content_type='text/markdown',
    license='Apache-2.0',
    license_files=['LICENSE'],
    keywords=['tensorflow', 'graph', 'speculative', 'compiler', 'jit'],
    project_urls={
        'Paper': 'https://www.usenix.org/conference/nsdi19/presentation/jeong',
    },
    classifiers=[
        'Development Status :: 3 - Alpha',
        'Intended Audience :: Developers',
        'Intended Audience :: Science/Research',
        'Operating System :: POSIX :: Linux',
        'Programming Language :: C++',
        'Programming Language :: Python :: 3',
        'Programming Language :: Python :: 3 :: Only',
        'Programming Language :: Python :: 3.11',
        'Topic :: Scientific/Engineering :: Artificial Intelligence',
        'Topic :: Software Development :: Compilers',
    ],
    # CPython 3.11 is what janus is developed and tested on; janus reads
    # 3.11 code objects (co_qualname) and the AST of that grammar.
    python_requires='>=3.11',
    # Namespace-aware: a subpackage missing its __init__.py would otherwise
    # be left out of regular installs only (editable ones read the sources).
    packages=find_namespace_packages(
        include=['janus', 'janus.*', 'janus_ops'], exclude=['*.__pycache__']),
    ext_modules=[Extension('janus_ops._janus_ops', sources=OPS_SOURCES)],
    cmdclass={'build_ext': BuildTFOps},
    # One TensorFlow: the op library is built against it and refuses any
    # other at load time (janus/graph/ops.py).
    install_requires=[TF_REQUIREMENT, 'gast', 'astunparse', 'numpy', 'bytecode>=0.16'],
    # Horovod has no extra: 0.28.1 does not build against TF 2.21 as
    # published; `bash scripts/install_horovod.sh` builds a patched wheel.
    extras_require={'test': ['pytest', 'gymnasium'], 'examples': ['gymnasium'],
                    'benchmarks': ['gymnasium', 'matplotlib']},
    zip_safe=False,
)
