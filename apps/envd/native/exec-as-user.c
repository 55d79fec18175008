/*
 * exec-as-user: drop to a user (uid, gid and supplementary groups) and exec a command.
 *
 *   exec-as-user <uid> <gid> <g1,g2,...|-> -- <cmd> [args...]
 *
 * Used by Tidepool envd because Node (libuv) and node-pty can set uid/gid but not the
 * supplementary group list. Runs as root, so the privilege drop happens in the child.
 * Also raises the child's oom_score_adj to 100 (best effort) so the kernel prefers user
 * processes over envd when memory runs out.
 *
 * Exit codes on its own failures: 125 bad usage or privilege drop failed,
 * 126 command found but not executable, 127 command not found (like a shell).
 *
 *   exec-as-user --serve
 *
 * runs the long-lived spawn server instead (exec-as-user-server.c), which envd uses to start
 * commands without forking itself.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "exec-as-user.h"

static void fail(int code, const char *what, const char *detail) {
  if (detail != NULL) fprintf(stderr, "exec-as-user: %s: %s\n", what, detail);
  else fprintf(stderr, "exec-as-user: %s\n", what);
  exit(code);
}

static int parse_id(const char *text, unsigned long *out) {
  char *end = NULL;
  if (text == NULL || *text == '\0' || *text == '-') return -1;
  errno = 0;
  unsigned long value = strtoul(text, &end, 10);
  if (errno != 0 || *end != '\0' || value > (unsigned long)UINT_MAX - 1) return -1;
  *out = value;
  return 0;
}

int parse_groups(const char *text, gid_t *groups, int max) {
  int count = 0;
  if (strcmp(text, "-") == 0 || *text == '\0') return 0;
  char *copy = strdup(text);
  if (copy == NULL) return -1;
  char *save = NULL;
  for (char *item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
    unsigned long value;
    if (count >= max || parse_id(item, &value) != 0) {
      free(copy);
      return -1;
    }
    groups[count++] = (gid_t)value;
  }
  free(copy);
  return count;
}

void raise_oom_score(void) {
  int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t ignored = write(fd, "100", 3);
  (void)ignored;
  close(fd);
}

int switch_user(uid_t uid, gid_t gid, const gid_t *groups, int ngroups) {
  if (geteuid() == 0) {
    if (setgroups((size_t)ngroups, groups) != 0) return -1;
    if (setgid(gid) != 0) return -1;
    if (setuid(uid) != 0) return -1;
    return 0;
  }
  if (geteuid() != uid || getegid() != gid) {
    errno = EPERM;
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  static gid_t groups[MAX_GROUPS];
  if (argc == 2 && strcmp(argv[1], "--serve") == 0) return serve_main();
  unsigned long uid, gid;
  if (argc < 6 || strcmp(argv[4], "--") != 0) fail(125, "usage: exec-as-user <uid> <gid> <g1,g2,...|-> -- <cmd> [args...]", NULL);
  if (parse_id(argv[1], &uid) != 0) fail(125, "invalid uid", argv[1]);
  if (parse_id(argv[2], &gid) != 0) fail(125, "invalid gid", argv[2]);
  int ngroups = parse_groups(argv[3], groups, MAX_GROUPS);
  if (ngroups < 0) fail(125, "invalid group list", argv[3]);

  raise_oom_score();

  if (geteuid() == 0) {
    if (setgroups((size_t)ngroups, groups) != 0) fail(125, "setgroups", strerror(errno));
    if (setgid((gid_t)gid) != 0) fail(125, "setgid", strerror(errno));
    if (setuid((uid_t)uid) != 0) fail(125, "setuid", strerror(errno));
  } else if (geteuid() != (uid_t)uid || getegid() != (gid_t)gid) {
    fail(125, "not running as root, cannot switch user", NULL);
  }

  execvp(argv[5], &argv[5]);
  int err = errno;
  fprintf(stderr, "exec-as-user: %s: %s\n", argv[5], strerror(err));
  return (err == ENOENT || err == ENOTDIR) ? 127 : 126;
}
