/*
 * kubelet-rs pause: the process that holds a pod sandbox's namespaces.
 *
 * It sleeps until SIGTERM or SIGINT and reaps every child that is re-parented to it
 * (it is PID 1 of the pod's PID namespace when the pod shares one). Written for
 * kubelet-rs; built statically by scripts/node-env.sh.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested = 0;

static void on_stop(int sig) {
    (void)sig;
    stop_requested = 1;
}

static void on_child(int sig) {
    (void)sig;
    int saved = errno;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    errno = saved;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        printf("kubelet-rs pause 1.0\n");
        return 0;
    }
    struct sigaction stop_action;
    memset(&stop_action, 0, sizeof(stop_action));
    stop_action.sa_handler = on_stop;
    sigemptyset(&stop_action.sa_mask);
    if (sigaction(SIGTERM, &stop_action, NULL) < 0 || sigaction(SIGINT, &stop_action, NULL) < 0) {
        perror("pause: sigaction");
        return 1;
    }
    struct sigaction child_action;
    memset(&child_action, 0, sizeof(child_action));
    child_action.sa_handler = on_child;
    child_action.sa_flags = SA_NOCLDSTOP | SA_RESTART;
    sigemptyset(&child_action.sa_mask);
    if (sigaction(SIGCHLD, &child_action, NULL) < 0) {
        perror("pause: sigaction");
        return 1;
    }
    /* Block the stop signals outside sigsuspend so one arriving between the check and the
     * wait is not lost. */
    sigset_t blocked, waiting;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGTERM);
    sigaddset(&blocked, SIGINT);
    sigprocmask(SIG_BLOCK, &blocked, &waiting);
    sigdelset(&waiting, SIGTERM);
    sigdelset(&waiting, SIGINT);
    while (!stop_requested) {
        sigsuspend(&waiting);
    }
    return 0;
}
