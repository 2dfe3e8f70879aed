// Making an NSObject subclass from its metadata (CProtFSObject.h).
#define _GNU_SOURCE
#include "CProtFSObject.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

/* The runtime's method lookup, and the descriptors of NSObject and of its init() in Foundation
   (their mangled names: Foundation.NSObject's nominal type descriptor, and its method descriptor
   for init()'s allocating entry). */
static void *(*look_up)(const void *metadata, const void *method, const void *description);
static const void *init_method;
static const void *nsobject_description;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void resolve(void) {
  look_up = (void *(*)(const void *, const void *, const void *))dlsym(RTLD_DEFAULT, "swift_lookUpClassMethod");
  init_method = dlsym(RTLD_DEFAULT, "$s10Foundation8NSObjectCACycfCTq");
  nsobject_description = dlsym(RTLD_DEFAULT, "$s10Foundation8NSObjectCMn");
}

/* A class's allocating init(): Swift's calling convention, the class (its metadata) as self. */
typedef __attribute__((swiftcall)) void *(*allocating_init)(__attribute__((swift_context)) void *self);

void *protfs_make_object(const void *cls) {
  pthread_once(&once, resolve);
  if (!look_up || !init_method || !nsobject_description) return NULL;
  allocating_init make = (allocating_init)look_up(cls, init_method, nsobject_description);
  return make ? make((void *)cls) : NULL;
}
