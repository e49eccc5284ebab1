// SPDX-License-Identifier: MIT
/*
 * profile.c - a QEMU TCG plugin for `scripts/vm-lane bench --profile DIR`: counts the guest
 * instructions executed per translated block, between two marker instructions that
 * kevent-bench's load generator executes at the start and at the end of each measured window
 * (`nopl 0x4b455601(%rax)` and `nopl 0x4b455602(%rax)`, 7-byte NOPs on any CPU). At each end
 * marker it writes DIR/window-N.txt: one line "VADDR INSNS" per block address that ran in the
 * window (both vCPUs, user and kernel). Blocks are attributed to functions afterwards, on the
 * host, with the kernel's System.map.
 *
 * The declarations below are QEMU's plugin API (version 1, QEMU 7.x/8.x), written out here
 * because Debian ships no qemu-plugin.h. Build: gcc -shared -fPIC -O2 -o profile.so profile.c
 * Load: qemu-system-x86_64 ... -plugin ./profile.so,dir=DIR
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct qemu_info qemu_info_t;
enum qemu_plugin_cb_flags { CB_NO_REGS };
enum qemu_plugin_op { INLINE_ADD_U64 };
typedef void (*tb_trans_cb)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*vcpu_udata_cb)(unsigned int vcpu, void *udata);
typedef void (*udata_cb)(qemu_plugin_id_t id, void *udata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, tb_trans_cb cb);
void qemu_plugin_register_vcpu_tb_exec_inline(struct qemu_plugin_tb *tb,
					      enum qemu_plugin_op op, void *ptr,
					      uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
					    vcpu_udata_cb cb,
					    enum qemu_plugin_cb_flags flags,
					    void *udata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
uint64_t qemu_plugin_tb_vaddr(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb,
						 size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

/* One translation of a block: its address and how many instructions it ran. */
struct block {
	uint64_t vaddr;
	uint64_t count;
};

static struct block **blocks;
static size_t nblocks, cap;
static char dir[4096];
static unsigned int windows;

static const unsigned char marker[3] = { 0x0f, 0x1f, 0x80 };

static void begin(unsigned int vcpu, void *udata)
{
	size_t i;

	(void)vcpu;
	(void)udata;
	for (i = 0; i < nblocks; i++)
		blocks[i]->count = 0;
}

static void end(unsigned int vcpu, void *udata)
{
	char path[4200];
	FILE *f;
	size_t i;

	(void)vcpu;
	(void)udata;
	snprintf(path, sizeof(path), "%s/window-%u.txt", dir, windows++);
	f = fopen(path, "w");
	if (!f)
		return;
	for (i = 0; i < nblocks; i++)
		if (blocks[i]->count)
			fprintf(f, "%llx %llu\n",
				(unsigned long long)blocks[i]->vaddr,
				(unsigned long long)blocks[i]->count);
	fclose(f);
}

static void translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb), i;
	struct block *b;

	(void)id;
	if (nblocks == cap) {
		cap = cap ? cap * 2 : 65536;
		blocks = realloc(blocks, cap * sizeof(*blocks));
		if (!blocks)
			abort();
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		abort();
	b->vaddr = qemu_plugin_tb_vaddr(tb);
	blocks[nblocks++] = b;
	qemu_plugin_register_vcpu_tb_exec_inline(tb, INLINE_ADD_U64, &b->count, n);
	for (i = 0; i < n; i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		const unsigned char *p = qemu_plugin_insn_data(insn);

		if (qemu_plugin_insn_size(insn) != 7 || memcmp(p, marker, 3) ||
		    p[4] != 0x56 || p[5] != 0x45 || p[6] != 0x4b)
			continue;
		if (p[3] == 0x01)
			qemu_plugin_register_vcpu_insn_exec_cb(insn, begin, CB_NO_REGS, NULL);
		else if (p[3] == 0x02)
			qemu_plugin_register_vcpu_insn_exec_cb(insn, end, CB_NO_REGS, NULL);
	}
}

__attribute__((visibility("default"))) int
qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	int i;

	(void)info;
	strcpy(dir, ".");
	for (i = 0; i < argc; i++)
		if (!strncmp(argv[i], "dir=", 4))
			snprintf(dir, sizeof(dir), "%s", argv[i] + 4);
	qemu_plugin_register_vcpu_tb_trans_cb(id, translate);
	return 0;
}
