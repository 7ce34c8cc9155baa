/*
 * The options of the simulated cluster, faults, --data and RBAC, and their
 * start and stop in the order main() needs: tokens and the replayed log
 * (then, with RBAC, the default ClusterRoles) before the built-in
 * namespaces are created; controllers and fault timers
 * once ksim serves; everything stopped before the store is freed.
 */
#include <stdlib.h>
#include <string.h>
#include "sim.h"
#include "banned.h"

static long duration_arg(const char *arg)
{
	long ms = tool_parse_duration_ms(arg);

	if (ms < 0)
		die_usage("invalid duration '%s'", arg);
	return ms;
}

int ksim_sim_option(int c, const char *arg)
{
	switch (c) {
	case OPT_NO_SIMULATE:
		sim_opts.enabled = 0;
		return 1;
	case OPT_POD_START_DELAY:
		sim_opts.pod_start_ms = duration_arg(arg);
		return 1;
	case OPT_POD_RUN_DURATION:
		sim_opts.pod_run_ms = duration_arg(arg);
		return 1;
	case OPT_LB_DELAY:
		sim_opts.lb_ms = duration_arg(arg);
		return 1;
	case OPT_BROKEN_IMAGE:
		sim_opts.broken_image = arg;
		return 1;
	case OPT_DATA:
		if (!*arg)
			die_usage("empty --data directory");
		persist_dir = arg;
		return 1;
	}
	return faults_option(c, arg) || rbac_option(c, arg);
}

void ksim_sim_init(void)
{
	rbac_init();
	persist_load();
	if (rbac_enabled())
		rbac_bootstrap();
}

void ksim_sim_start(void)
{
	faults_start();
	sim_start();
}

void ksim_sim_stop(void)
{
	sim_stop();
	faults_stop();
	persist_close();
	rbac_free();
}
