#!/usr/bin/env node
'use strict';
/*
 * The package's install step: compiles src/*.c into build/blitz_node.node
 * with the system's C compiler, against the Node-API headers of the
 * running node and the first libblitz it finds:
 *
 *   1. BLITZ_LIB_DIR (the directory of libblitz.so; headers from
 *      BLITZ_INCLUDE_DIR, <lib>/../include, a checkout's include/ above it,
 *      or, for a meson build directory, the include/ of the source tree its
 *      meson-info names: meson setup /elsewhere/build puts nothing else near it),
 *   2. pkg-config blitz (an installed libblitz),
 *   3. the build/ directory of the libblitz checkout this package comes
 *      from (found also when npm copied the package: --install-links).
 *
 * Nothing is downloaded: no node-gyp, no header tarball. The addon gets an
 * rpath to the library's directory, so it loads without LD_LIBRARY_PATH.
 * CC names another compiler; BLITZ_NODE_INCLUDE another Node-API header dir.
 */
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const pkgDir = path.resolve(__dirname, '..');

function fail(message) {
  console.error(`libblitz: ${message}`);
  process.exit(1);
}

function hasLib(dir) {
  return dir && fs.existsSync(path.join(dir, 'libblitz.so'));
}

function hasHeader(dir) {
  return dir && fs.existsSync(path.join(dir, 'blitz.h'));
}

/* A libblitz checkout: a directory with include/blitz.h and meson.build. */
function checkoutAbove(start) {
  for (let dir = path.resolve(start); ; dir = path.dirname(dir)) {
    if (hasHeader(path.join(dir, 'include')) && fs.existsSync(path.join(dir, 'meson.build'))) return dir;
    if (path.dirname(dir) === dir) return null;
  }
}

/*
 * Where this package's files came from. In place (npm install in the
 * package, or a symlinked install) that is pkgDir; for a copy
 * (--install-links), npm tells the install script the source as
 * npm_package_resolved = "file:<path>", relative to the project npm was run
 * in (INIT_CWD).
 */
function sourceDirs() {
  const dirs = [pkgDir];
  const resolved = process.env.npm_package_resolved || '';
  if (resolved.startsWith('file:')) {
    const rel = decodeURIComponent(resolved.slice('file:'.length));
    dirs.push(path.resolve(process.env.INIT_CWD || process.cwd(), rel));
  }
  return dirs;
}

/*
 * The source tree of the meson build directory that holds `dir`, as its
 * meson-info/meson-info.json records it (directories.source), or null.
 */
function mesonSourceDir(dir) {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    const info = path.join(d, 'meson-info', 'meson-info.json');
    if (fs.existsSync(info)) {
      try {
        const source = JSON.parse(fs.readFileSync(info, 'utf8')).directories?.source;
        return typeof source === 'string' ? source : null;
      } catch {
        return null;
      }
    }
    if (path.dirname(d) === d) return null;
  }
}

function pkgConfig(args) {
  try {
    return execFileSync('pkg-config', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return null;
  }
}

function findLibblitz() {
  const env = process.env.BLITZ_LIB_DIR;
  if (env) {
    const lib = path.resolve(env);
    if (!hasLib(lib)) fail(`BLITZ_LIB_DIR=${env} holds no libblitz.so`);
    const checkout = checkoutAbove(lib);
    const source = mesonSourceDir(lib);
    // [directory, how it was found], in order of preference
    const candidates = [
      [process.env.BLITZ_INCLUDE_DIR, 'BLITZ_INCLUDE_DIR'],
      [path.join(lib, '..', 'include'), '<lib>/../include'],
      [checkout && path.join(checkout, 'include'), `the checkout ${checkout}`],
      [source && path.join(source, 'include'), `meson's source directory ${source}`],
    ];
    const found = candidates.find(([dir]) => hasHeader(dir));
    if (!found) fail(`no blitz.h for BLITZ_LIB_DIR=${env}: set BLITZ_INCLUDE_DIR`);
    const include = path.resolve(found[0]);
    return { lib, cflags: ['-I', include], how: 'BLITZ_LIB_DIR', header: `blitz.h from ${found[1]}` };
  }
  if (pkgConfig(['--exists', 'blitz']) !== null) {
    const lib = pkgConfig(['--variable=libdir', 'blitz']);
    const cflags = (pkgConfig(['--cflags', 'blitz']) || '').split(/\s+/).filter(Boolean);
    if (hasLib(lib)) return { lib, cflags, how: 'pkg-config blitz', header: 'blitz.h by pkg-config' };
  }
  for (const dir of sourceDirs()) {
    const checkout = checkoutAbove(dir);
    if (checkout && hasLib(path.join(checkout, 'build'))) {
      return { lib: path.join(checkout, 'build'), cflags: ['-I', path.join(checkout, 'include')],
               how: `the checkout ${checkout}`, header: 'blitz.h from the checkout' };
    }
  }
  fail('libblitz not found: set BLITZ_LIB_DIR to the directory of libblitz.so, install it (pkg-config blitz), ' +
       'or build the checkout this package comes from (./dev build)');
}

function findNodeHeaders() {
  const candidates = [
    process.env.BLITZ_NODE_INCLUDE,
    path.resolve(path.dirname(process.execPath), '..', 'include', 'node'),
    '/usr/include/node',
    '/usr/local/include/node',
  ];
  const dir = candidates.find((d) => d && fs.existsSync(path.join(d, 'node_api.h')));
  if (!dir) {
    fail(`Node-API headers (node_api.h) not found next to ${process.execPath} nor in /usr/include/node ` +
         '(Debian: apt-get install libnode-dev; or set BLITZ_NODE_INCLUDE). They are never downloaded.');
  }
  return dir;
}

function main() {
  const blitz = findLibblitz();
  const nodeInclude = findNodeHeaders();
  const outDir = path.join(pkgDir, 'build');
  fs.mkdirSync(outDir, { recursive: true });
  const out = path.join(outDir, 'blitz_node.node');
  const cc = process.env.CC || 'cc';
  // Every C file of src/ (the package ships src/ whole; the bench's libuv
  // module lives in bench/, which is not in the package).
  const srcDir = path.join(pkgDir, 'src');
  const sources = fs.readdirSync(srcDir).filter((f) => f.endsWith('.c')).sort().map((f) => path.join(srcDir, f));
  const args = [
    '-std=c11', '-O2', '-fPIC', '-shared', '-fvisibility=hidden', '-Wall', '-Wextra',
    '-isystem', nodeInclude, ...blitz.cflags,
    ...sources,
    '-o', out,
    '-L', blitz.lib, '-lblitz', `-Wl,-rpath,${blitz.lib}`, '-lm', '-ldl', '-pthread',
  ];
  try {
    execFileSync(cc, args, { stdio: 'inherit' });
  } catch (error) {
    fail(`${cc} failed (${error.message}); the command was: ${cc} ${args.join(' ')}`);
  }
  console.log(`libblitz: built ${path.relative(process.cwd(), out) || out} against libblitz in ${blitz.lib} ` +
              `(${blitz.how}), ${blitz.header}, Node-API headers in ${nodeInclude}`);
}

main();
