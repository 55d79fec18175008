/*
 * envd-launcher: /opt/tidepool/bin/envd, the one command that starts envd in any image.
 *
 *   envd [flags]            -> /opt/tidepool/bin/node /opt/tidepool/lib/envd.mjs [flags]
 *   envd provision [flags]  -> the same, envd's own code dispatches on the first argument
 *
 * Linked statically, so it runs in images without a shell or a C library. The runtime's Node
 * carries its own dynamic loader and libraries (/opt/tidepool/glibc); what this launcher adds:
 *
 *   - umask 022, inherited by envd and everything it starts;
 *   - envd's Node ignores the image's settings for the dynamic loader and for Node itself
 *     (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, NODE_OPTIONS, NODE_PATH). envd builds the
 *     environment of user processes itself, so this changes nothing for them.
 *
 * Exit codes on its own failures: 126 Node is there but cannot be executed, 127 it is missing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef TIDEPOOL_HOME
#define TIDEPOOL_HOME "/opt/tidepool"
#endif

static const char *const IGNORED_ENV[] = {"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "NODE_OPTIONS", "NODE_PATH", NULL};

int main(int argc, char **argv) {
  char **args = calloc((size_t)argc + 2, sizeof(char *));
  if (args == NULL) {
    fputs("envd: out of memory\n", stderr);
    return 125;
  }
  args[0] = TIDEPOOL_HOME "/bin/node";
  args[1] = TIDEPOOL_HOME "/lib/envd.mjs";
  for (int i = 1; i < argc; i++) args[i + 1] = argv[i];
  args[argc + 1] = NULL;

  umask(022);
  for (const char *const *name = IGNORED_ENV; *name != NULL; name++) unsetenv(*name);

  execv(args[0], args);
  int err = errno;
  fprintf(stderr, "envd: cannot execute %s: %s\n", args[0], strerror(err));
  return err == ENOENT ? 127 : 126;
}
