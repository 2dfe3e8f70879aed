#include <sys/types.h>
#include <sys/xattr.h>
#include <attr/libattr.h>
#include <attr/error_context.h>
