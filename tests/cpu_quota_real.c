/*
 * The default pool size under a real CPU quota: cgroup v1's cpu controller
 * (/sys/fs/cgroup/cpu, writable by root on the CI machines). A child
 * process is moved into a new cgroup with a quota, then creates a pool with
 * num_threads 0 and checks what blz_default_size and the pool say.
 *
 * Exits 77 (meson: skipped) when the controller is not there or not
 * writable (not root; a cgroup v2-only system, whose parsing
 * tests/unit_cpu_quota.cpp covers on laid-out files); saying why.
 */
#define _GNU_SOURCE
#include <blitz.h>

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define CPU_ROOT "/sys/fs/cgroup/cpu"
#define SKIP 77

static char g_dir[256];

static int write_text(const char *file, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, file);
    FILE *f = fopen(path, "w");
    if (f == NULL) return -1;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static int affinity_cpus(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    return CPU_COUNT(&set);
}

/* In the child: joins the cgroup, then checks the size for a quota of
 * `quota_us` per 100 ms (expected whole CPUs: `want_quota`). */
static int child(long quota_us, unsigned want_quota) {
    char pid[32];
    snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    if (write_text("tasks", pid) != 0) {
        perror("cpu_quota_real: joining the cgroup");
        return 1;
    }
    unsetenv("BLZ_NUM_THREADS");
    blz_default_size_info info;
    memset(&info, 0xAB, sizeof info);
    info.struct_size = (uint32_t)sizeof info;
    if (blz_default_size(&info) != BLZ_OK) {
        fprintf(stderr, "cpu_quota_real: blz_default_size failed\n");
        return 1;
    }
    const unsigned cpus = (unsigned)affinity_cpus();
    const int limited = want_quota != 0 && want_quota < cpus;
    const unsigned want = limited ? want_quota : cpus;
    const unsigned want_source = limited ? BLZ_SIZE_FROM_CPU_QUOTA : BLZ_SIZE_FROM_AFFINITY;
    printf("quota %ld us per 100 ms, %u CPUs in the mask: num_threads %u (want %u), source %u (want %u), "
           "quota_cpus %u (want %u), affinity_cpus %u, environment %u\n",
           quota_us, cpus, info.num_threads, want, info.source, want_source, info.quota_cpus, want_quota,
           info.affinity_cpus, info.environment);
    int bad = info.num_threads != want || info.source != want_source || info.quota_cpus != want_quota ||
              info.affinity_cpus != cpus || info.environment != 0;
    blz_pool_config config;
    blz_pool_config_init(&config);
    blz_pool *pool = NULL;
    if (blz_pool_create(&config, &pool) != BLZ_OK) return 1;
    if (blz_pool_num_threads(pool) != want) {
        fprintf(stderr, "cpu_quota_real: a pool of num_threads 0 has %u workers, not %u\n",
                blz_pool_num_threads(pool), want);
        bad = 1;
    }
    blz_pool_destroy(pool);
    return bad;
}

static int run_case(long quota_us, unsigned want_quota) {
    char text[32];
    snprintf(text, sizeof text, "%ld\n", quota_us);
    if (write_text("cpu.cfs_period_us", "100000\n") != 0 || write_text("cpu.cfs_quota_us", text) != 0) {
        perror("cpu_quota_real: writing the quota");
        return 1;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        const int result = child(quota_us, want_quota);
        fflush(stdout);  /* _exit does not flush */
        _exit(result);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) return 1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int main(void) {
    struct stat st;
    if (stat(CPU_ROOT "/cpu.cfs_quota_us", &st) != 0) {
        printf("cpu_quota_real: skipped: no cgroup v1 cpu controller at " CPU_ROOT "\n");
        return SKIP;
    }
    snprintf(g_dir, sizeof g_dir, CPU_ROOT "/blz-quota-test-%d", (int)getpid());
    if (mkdir(g_dir, 0755) != 0) {
        printf("cpu_quota_real: skipped: cannot create %s (%s); run as root\n", g_dir, strerror(errno));
        return SKIP;
    }
    const int cpus = affinity_cpus();
    int failed = 0;
    failed |= run_case(50000, 1);                  /* half a CPU: 1 worker */
    failed |= run_case(150000, 2);                 /* 1.5 CPUs: rounded up */
    failed |= run_case(100000L * (cpus + 3), (unsigned)cpus + 3); /* above the mask: the mask */
    failed |= run_case(-1, 0);                     /* no quota */
    if (rmdir(g_dir) != 0) perror("cpu_quota_real: removing the cgroup");
    printf("cpu_quota_real: %s\n", failed ? "FAILED" : "ok");
    return failed ? 1 : 0;
}
