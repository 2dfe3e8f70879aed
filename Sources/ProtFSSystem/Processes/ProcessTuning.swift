import CProtFSSys

/// Settings a protfs process makes for itself at start; a library user's process is left alone.
public enum ProcessTuning {
  /// Keeps freed memory in the process instead of returning it to the kernel after every large
  /// free (glibc's default): a download engine frees and reallocates libcurl's receive buffers per
  /// transfer, and with the default each cycle costs an madvise and a page fault per touched page.
  /// Peak memory is unchanged; what was freed is reused rather than given back.
  public static func keepFreedMemory() {
    protfs_malloc_keep_freed_memory()
  }
}
