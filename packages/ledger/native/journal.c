/*
 * The answer journal's mapped file (packages/ledger/src/internal/JournalFile.ts): two functions.
 *
 * `map(fd, length)` allocates the file's first `length` bytes on disk (`posix_fallocate`) and maps
 * them shared and writable, on a file system where an allocated block is overwritten in place
 * (ext4, xfs, tmpfs: a store into the mapping then never needs a block the disk may not have, so
 * a full disk is this call's error, not a SIGBUS at a later store); on any other file system
 * (copy-on-write ones, network ones, overlays) it refuses, and the journal appends with `write(2)`.
 * A store into the returned ArrayBuffer is in the page cache, as a `write(2)` would have put it:
 * it outlives the process (SIGKILL included), not the machine.
 *
 * `unmap(buffer)` unmaps it at once and detaches the buffer (its views read and write nothing
 * after); otherwise the mapping goes when the buffer is collected. Closing a file's last
 * descriptor does not free its blocks while it is mapped: the journal unmaps a file it lets go of.
 *
 * Node-API only (ABI-stable across Node versions); Linux. Built by ./build.mjs; without it the
 * journal appends with `write(2)`, as before.
 */
#define _FILE_OFFSET_BITS 64
#define NAPI_VERSION 8
#include <node_api.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/vfs.h>

#define EXT4_MAGIC 0xEF53
#define XFS_MAGIC 0x58465342
#define TMPFS_MAGIC 0x01021994

/* Every live mapping, so that `unmap` and the finalizer never unmap a range twice (an address
 * range unmapped once may be another mapping's by the time a late finalizer runs). */
typedef struct Mapping {
  void* data;
  size_t length;
  int live;
  struct Mapping* next;
} Mapping;
static Mapping* mappings = NULL;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void finalize(napi_env env, void* data, void* hint) {
  (void)env;
  (void)data;
  Mapping* m = (Mapping*)hint;
  pthread_mutex_lock(&lock);
  if (m->live) munmap(m->data, m->length);
  for (Mapping** at = &mappings; *at != NULL; at = &(*at)->next)
    if (*at == m) {
      *at = m->next;
      break;
    }
  pthread_mutex_unlock(&lock);
  free(m);
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
      fd < 0 || length <= 0 || (uint64_t)length > (uint64_t)SIZE_MAX || length > ((int64_t)1 << 40))
    return fail(env, "EINVAL", EINVAL);
  struct statfs fs;
  if (fstatfs(fd, &fs) != 0) return fail(env, "EFSTYPE", errno);
  if (fs.f_type != EXT4_MAGIC && fs.f_type != XFS_MAGIC && fs.f_type != TMPFS_MAGIC)
    return fail(env, "EFSTYPE", EOPNOTSUPP);
  int rc;
  do rc = posix_fallocate(fd, 0, (off_t)length);
  while (rc == EINTR);
  if (rc != 0) return fail(env, rc == ENOSPC ? "ENOSPC" : "EFALLOCATE", rc);
  void* p = mmap(NULL, (size_t)length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return fail(env, "EMMAP", errno);
  Mapping* m = (Mapping*)malloc(sizeof(Mapping));
  if (m == NULL) {
    munmap(p, (size_t)length);
    return fail(env, "ENOMEM", ENOMEM);
  }
  m->data = p;
  m->length = (size_t)length;
  m->live = 1;
  napi_value buffer;
  if (napi_create_external_arraybuffer(env, p, (size_t)length, finalize, m, &buffer) != napi_ok) {
    munmap(p, (size_t)length);
    free(m);
    return fail(env, "EEXTERNAL", ENOMEM);
  }
  pthread_mutex_lock(&lock);
  m->next = mappings;
  mappings = m;
  pthread_mutex_unlock(&lock);
  return buffer;
}

static napi_value Unmap(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  void* data;
  size_t length;
  bool is;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 1 ||
      napi_is_arraybuffer(env, argv[0], &is) != napi_ok || !is ||
      napi_get_arraybuffer_info(env, argv[0], &data, &length) != napi_ok)
    return fail(env, "EINVAL", EINVAL);
  // Detached first: none of its views reads or writes the range from here on. (The finalizer,
  // which detaching may schedule, finds the mapping no longer live and leaves it.)
  if (napi_detach_arraybuffer(env, argv[0]) != napi_ok) return fail(env, "EDETACH", EINVAL);
  pthread_mutex_lock(&lock);
  for (Mapping* m = mappings; m != NULL; m = m->next)
    if (m->live && m->data == data && m->length == length) {
      munmap(m->data, m->length);
      m->live = 0;
      break;
    }
  pthread_mutex_unlock(&lock);
  return NULL;
}

NAPI_MODULE_INIT() {
  napi_value map, unmap;
  if (napi_create_function(env, "map", NAPI_AUTO_LENGTH, Map, NULL, &map) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "map", map) != napi_ok) return NULL;
  if (napi_create_function(env, "unmap", NAPI_AUTO_LENGTH, Unmap, NULL, &unmap) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "unmap", unmap) != napi_ok) return NULL;
  return exports;
}
