/*
 * curpsinfo and curlwpsinfo: the process and thread a probe fired in, translated from
 * curthread (struct thread, see base.d) into illumos's psinfo_t and lwpsinfo_t.
 */

translator psinfo_t < struct thread *T > {
	pr_nlwp = 1;
	pr_pid = T->t_proc.p_pid;
	pr_ppid = T->t_proc.p_ppid;
	pr_pgid = T->t_proc.p_pid;
	pr_sid = T->t_proc.p_sessionid;
	pr_uid = T->t_proc.p_uid;
	pr_euid = T->t_proc.p_uid;
	pr_gid = T->t_proc.p_gid;
	pr_egid = T->t_proc.p_gid;
	pr_addr = (uintptr_t)T->t_procp;
	pr_start = T->t_proc.p_start;
	pr_fname = T->t_proc.p_fname;
	pr_psargs = T->t_proc.p_psargs;
	pr_dmodel = T->t_proc.p_dmodel;
	pr_sessionid = T->t_proc.p_sessionid;
};

translator lwpsinfo_t < struct thread *T > {
	pr_lwpid = T->t_tid;
	pr_addr = (uintptr_t)T;
	pr_pri = T->t_pri;
	pr_state = T->t_state;
	pr_sname = T->t_state == 2 ? 'O' : T->t_state == 1 ? 'R' : 'S';
	pr_start = T->t_start;
	pr_onpro = T->t_cpu;
	pr_bindpro = -1;
	pr_bindpset = -1;
	pr_tname = T->t_name;
};

inline psinfo_t *curpsinfo = xlate <psinfo_t *> (curthread);
inline lwpsinfo_t *curlwpsinfo = xlate <lwpsinfo_t *> (curthread);

/*
 * The CPU a sched probe's thread runs on or is queued for (args[2] of sched:::enqueue and
 * dequeue): only cpu_id is known over ETW; -1 when the event does not name the queue's CPU.
 */
translator cpuinfo_t < struct thread *T > {
	cpu_id = T->t_cpu;
	cpu_pset = -1;
	cpu_chip = 0;
	cpu_lgrp = 0;
	cpu_info = 0;
};
