/*
 * The answer journal's mapped file (packages/ledger/src/internal/JournalFile.ts): one function,
 * `map(fd, length)`, that allocates the file's first `length` bytes on disk (`posix_fallocate`: a
 * full disk is an error here, never a SIGBUS at a later store) and maps them shared and writable.
 * A store into the returned ArrayBuffer is in the page cache, as a `write(2)` would have put it:
 * it outlives the process (SIGKILL included), not the machine. The mapping is unmapped when the
 * ArrayBuffer is collected; the descriptor can be closed once mapped.
 *
 * Node-API only (ABI-stable across Node versions); Linux. Built by ../native/build.mjs; without
 * it the journal appends with `write(2)`, as before.
 */
#define NAPI_VERSION 8
#include <node_api.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

static void unmap(napi_env env, void* data, void* hint) {
  (void)env;
  munmap(data, (size_t)(uintptr_t)hint);
}

static napi_value fail(napi_env env, const char* code, int error) {
  napi_throw_error(env, code, strerror(error));
  return NULL;
}

static napi_value Map(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int32_t fd;
  int64_t length;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 2 ||
      napi_get_value_int32(env, argv[0], &fd) != napi_ok || napi_get_value_int64(env, argv[1], &length) != napi_ok ||
      fd < 0 || length <= 0 || length > ((int64_t)1 << 40))
    return fail(env, "EINVAL", EINVAL);
  int rc = posix_fallocate(fd, 0, (off_t)length);
  if (rc != 0) return fail(env, rc == ENOSPC ? "ENOSPC" : "EFALLOCATE", rc);
  void* p = mmap(NULL, (size_t)length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return fail(env, "EMMAP", errno);
  napi_value buffer;
  if (napi_create_external_arraybuffer(env, p, (size_t)length, unmap, (void*)(uintptr_t)length, &buffer) != napi_ok) {
    munmap(p, (size_t)length);
    return fail(env, "EEXTERNAL", ENOMEM);
  }
  return buffer;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  if (napi_create_function(env, "map", NAPI_AUTO_LENGTH, Map, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "map", fn) != napi_ok) return NULL;
  return exports;
}
