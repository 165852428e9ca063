#!/usr/bin/env bash
# Build llama.cpp's `llama-server` (EAGLE-3: --spec-type draft-eagle3) from the llama.cpp vendored
# in the PyPI source package llama-cpp-python==VERSION, into DEST/bin/llama-server.
#   scripts/build_llama_server.sh DEST PYTHON [VERSION]
# Cached: an existing DEST/bin/llama-server is reused. Offline apart from the one `pip download`:
# the web UI is neither downloaded (LLAMA_USE_PREBUILT_UI=OFF) nor built (LLAMA_BUILD_UI=OFF),
# no HTTPS/curl (LLAMA_OPENSSL=OFF; LLAMA_CURL no longer exists), no tests/examples/app.
# When the build is not possible, the reason is written to DEST/BUILD_FAILED, printed, and the
# script exits 0: `make engine` goes on (vLLM) and the llama.cpp tests skip, naming that reason.
# JOBS (default 2) sets the parallel compile jobs; the build runs under `nice`.
set -u
DEST=${1:?usage: build_llama_server.sh DEST PYTHON [VERSION]}
PY=${2:?usage: build_llama_server.sh DEST PYTHON [VERSION]}
VERSION=${3:-0.3.36}
BIN="$DEST/bin/llama-server"
if [ -x "$BIN" ]; then
    echo "llama.cpp: using $BIN (llama-cpp-python $VERSION, cached)"
    exit 0
fi
fail() {
    mkdir -p "$DEST"
    printf '%s\n' "$*" > "$DEST/BUILD_FAILED"
    echo "llama.cpp: llama-server NOT BUILT: $* (recorded in $DEST/BUILD_FAILED; llama.cpp tests will skip)" >&2
    [ -n "${WORK:-}" ] && rm -rf "$WORK"
    exit 0
}
command -v cmake >/dev/null 2>&1 || fail "cmake not found (apt-get install cmake)"
command -v c++ >/dev/null 2>&1 || fail "no C++ compiler (c++) found (apt-get install g++)"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/llama-build.XXXXXX")
t0=$(date +%s)
echo "llama.cpp: downloading the llama-cpp-python==$VERSION source package (vendored llama.cpp)"
"$PY" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$WORK" \
    || fail "pip download llama-cpp-python==$VERSION (sdist) failed"
tar xzf "$WORK"/llama_cpp_python-"$VERSION".tar.gz -C "$WORK" || fail "cannot unpack the sdist"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
[ -f "$SRC/src/models/eagle3.cpp" ] || fail "$SRC has no src/models/eagle3.cpp (no EAGLE-3 in this llama.cpp)"
nice -n 10 cmake -S "$SRC" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DBUILD_SHARED_LIBS=OFF > "$WORK/configure.log" 2>&1 \
    || fail "cmake configure failed: $(tail -3 "$WORK/configure.log" | tr '\n' ' ')"
echo "llama.cpp: building llama-server (minutes to tens of minutes on 2 cores; log in $WORK/build.log)"
nice -n 10 cmake --build "$WORK/build" --target llama-server -j "${JOBS:-2}" > "$WORK/build.log" 2>&1 \
    || fail "cmake --build --target llama-server failed: $(grep -m3 -i error "$WORK/build.log" | tr '\n' ' ')"
mkdir -p "$DEST/bin"
cp "$WORK/build/bin/llama-server" "$BIN.partial" && mv "$BIN.partial" "$BIN" || fail "cannot install into $DEST/bin"
printf 'llama-cpp-python %s (vendored llama.cpp), built %s in %ss\n' "$VERSION" "$(date -u +%FT%TZ)" \
    "$(( $(date +%s) - t0 ))" > "$DEST/VERSION"
rm -f "$DEST/BUILD_FAILED"
rm -rf "$WORK"
echo "llama.cpp: $BIN built in $(( $(date +%s) - t0 )) s"
