// asan_fuzzer_runtime.cpp — the one source of libjitbridge_asan_fuzzer.so, which is clang's ASan runtime and libFuzzer's
// driver (both linked whole from clang's static runtimes, see CMakeLists.txt) for the atheris targets' process.
extern "C" int jitbridge_asan_fuzzer_runtime() { return 1; }
