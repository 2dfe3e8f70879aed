/* What the C files of the confined spawn share: CProtFSSys.c makes the child, which runs
   CProtFSSpawnChild.c's steps and CProtFSMounts.c's. Not part of the module's interface (include/
   is); hidden, so that the child's calls to them are direct, never through the dynamic linker. */
#ifndef CPROTFSSPAWNINTERNAL_H
#define CPROTFSSPAWNINTERNAL_H

#include "CProtFSSpawn.h"

/* The child: every step of `spawn`, then the exec; a failed step is reported on `report` (the
   pipe's write end). Never returns. (CProtFSSpawnChild.c) */
__attribute__((visibility("hidden"))) void protfs_spawn_child(const struct protfs_spawn *spawn, int report,
                                                              int in_cgroup);

/* Detaches every protfs mount from this process's mount namespace but those of `target`
   (`keep_mount`: the mount at `target` alone). 0, or -1 with errno set. (CProtFSMounts.c) */
__attribute__((visibility("hidden"))) int protfs_spawn_detach(const char *target, int keep_mount);

/* Enters an app's sandbox: a mount namespace of its own with its container alone. 0, or -1 with
   errno set. (CProtFSMounts.c) */
__attribute__((visibility("hidden"))) int protfs_spawn_sandbox(const struct protfs_spawn *spawn);

#endif
