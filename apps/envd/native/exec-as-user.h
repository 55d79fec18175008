/* Shared by the one-shot mode (exec-as-user.c) and the spawn server (exec-as-user-server.c). */
#ifndef TIDEPOOL_EXEC_AS_USER_H
#define TIDEPOOL_EXEC_AS_USER_H

#include <sys/types.h>

#define MAX_GROUPS 1024

/* Parses "1,2,3" (or "-"/"" for none) into groups; returns the count or -1. */
int parse_groups(const char *text, gid_t *groups, int max);

/* Raises the calling process's oom_score_adj to 100 (best effort). */
void raise_oom_score(void);

/* Drops to uid/gid/groups when running as root; otherwise succeeds only if already that user.
 * Returns 0, or -1 with errno set (EPERM when not root and not that user). */
int switch_user(uid_t uid, gid_t gid, const gid_t *groups, int ngroups);

/* The spawn server (`exec-as-user --serve`); returns the process exit status. */
int serve_main(void);

#endif
