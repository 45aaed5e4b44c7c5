// SPDX-License-Identifier: GPL-2.0
/*
 * The smallest module that proves the out-of-tree build path: built against the
 * cached kernel tree, copied over SFTP, loaded, unloaded. It prints which CPU
 * ran its init and how many CPUs are online, so the test can check both.
 */
#include <linux/cpumask.h>
#include <linux/module.h>
#include <linux/smp.h>

static int __init profbench_hello_init(void)
{
	pr_info("profbench_hello: loaded on cpu %d of %u online\n",
		raw_smp_processor_id(), num_online_cpus());
	return 0;
}

static void __exit profbench_hello_exit(void)
{
	pr_info("profbench_hello: unloaded\n");
}

module_init(profbench_hello_init);
module_exit(profbench_hello_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("profbench out-of-tree module smoke test");
