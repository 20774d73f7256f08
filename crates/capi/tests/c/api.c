/*
 * The exported functions of libfabric.so.1 over ofi-rs, called the way a C program
 * does (tests/api.rs compiles this against the installed headers and runs it).
 * Prints one line per check; exits non-zero at the first failure.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_prov.h>
#include <rdma/providers/fi_log.h>
#include "check.h"


static void check_strerror(void)
{
	CHECK(!strcmp(fi_strerror(FI_EAGAIN), "Resource temporarily unavailable"), "%s",
	      fi_strerror(FI_EAGAIN));
	CHECK(!strcmp(fi_strerror(-FI_ETRUNC), "Truncation error"), "%s", fi_strerror(FI_ETRUNC));
	CHECK(!strcmp(fi_strerror(FI_EAVAIL), "Error available"), "%s", fi_strerror(FI_EAVAIL));
	CHECK(fi_strerror(FI_ENOSYS) == fi_strerror(FI_ENOSYS), "strings are stable");
	printf("strerror ok\n");
}

static void check_getinfo(void)
{
	struct fi_info *hints, *info, *cur, *dup;
	int ret, n = 0;

	CHECK(fi_version() == FI_VERSION(1, 17), "%x", fi_version());
	hints = fi_allocinfo();
	CHECK(hints && hints->tx_attr && hints->rx_attr && hints->ep_attr &&
	      hints->domain_attr && hints->fabric_attr && !hints->nic, "allocinfo");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED;
	hints->mode = ~0ULL;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				      FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup("shm");
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	CHECK(ret == 0, "fi_getinfo: %d %s", ret, fi_strerror(ret));
	for (cur = info; cur; cur = cur->next, n++) {
		CHECK(!strcmp(cur->fabric_attr->prov_name, "shm"), "%s",
		      cur->fabric_attr->prov_name);
		CHECK(cur->ep_attr->type == FI_EP_RDM, "%d", cur->ep_attr->type);
		CHECK((cur->caps & (FI_MSG | FI_TAGGED)) == (FI_MSG | FI_TAGGED), "caps");
		CHECK(cur->domain_attr->name && cur->fabric_attr->name, "names");
		CHECK(cur->fabric_attr->api_version == FI_VERSION(1, 17), "api_version");
	}
	CHECK(n > 0, "no results");

	/* fi_dupinfo: a deep copy that prints the same and frees separately. */
	dup = fi_dupinfo(info);
	CHECK(dup && !dup->next, "dupinfo");
	CHECK(dup->domain_attr->name != info->domain_attr->name, "deep copy");
	{
		char *a = strdup(fi_tostr(info, FI_TYPE_INFO));
		const char *b = fi_tostr(dup, FI_TYPE_INFO);
		CHECK(!strcmp(a, b), "tostr of the copy differs:\n%s\n%s", a, b);
		CHECK(strstr(a, "fi_info:\n") == a, "%s", a);
		CHECK(strstr(a, "prov_name: shm"), "%s", a);
		free(a);
	}
	fi_freeinfo(dup);
	fi_freeinfo(info);

	/* The program may replace strings of its hints and still free with fi_freeinfo. */
	free(hints->fabric_attr->prov_name);
	hints->fabric_attr->prov_name = strdup("no_such_provider");
	info = (struct fi_info *)0x1;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	CHECK(ret == -FI_ENODATA && info == NULL, "%d", ret);

	/* An invalid enumeration value in the hints is -FI_EINVAL. */
	free(hints->fabric_attr->prov_name);
	hints->fabric_attr->prov_name = NULL;
	hints->ep_attr->type = 77;
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	CHECK(ret == -FI_EINVAL, "%d", ret);
	fi_freeinfo(hints);

	/* A NULL out pointer is refused; NULL lists free as no-ops. */
	ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, NULL, NULL);
	CHECK(ret == -FI_EINVAL, "%d", ret);
	fi_freeinfo(NULL);

	/* tcp with a node and service: the address comes back in the list. */
	hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_MSG;
	hints->fabric_attr->prov_name = strdup("tcp");
	hints->addr_format = FI_SOCKADDR_IN;
	ret = fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "4711", FI_SOURCE, hints, &info);
	CHECK(ret == 0, "tcp getinfo: %d", ret);
	CHECK(info->src_addr && info->src_addrlen == sizeof(struct sockaddr_in), "src_addr");
	CHECK(strstr(fi_tostr(info, FI_TYPE_INFO), "fi_sockaddr_in://127.0.0.1:4711"), "%s",
	      fi_tostr(info, FI_TYPE_INFO));
	fi_freeinfo(info);
	fi_freeinfo(hints);
	printf("getinfo ok (%d shm results)\n", n);
}

/* The PCI address sysfs gives interface `ifname`: its resolved `device` link, or that
 * link's parent (a virtio NIC), named DDDD:BB:DD.F. 0 when there is none. */
static int sysfs_pci(const char *ifname, unsigned v[4])
{
	char link[256], path[4096], tail[8], *base;
	int up;

	snprintf(link, sizeof link, "/sys/class/net/%s/device", ifname);
	if (!realpath(link, path))
		return 0;
	for (up = 0; up < 2; up++) {
		base = strrchr(path, '/');
		if (!base)
			return 0;
		if (sscanf(base + 1, "%4x:%2x:%2x.%1x%7s", &v[0], &v[1], &v[2], &v[3], tail) == 4)
			return 1;
		*base = '\0';
	}
	return 0;
}

/* fi_nic's bus_attr on tcp's results: the loopback interface's (127.0.0.1) and the
 * default interface's, each as sysfs describes it. */
static void check_nic_bus(void)
{
	const char *nodes[] = { "127.0.0.1", NULL };
	struct fi_info *hints, *info;
	int k, ret;

	hints = fi_allocinfo();
	CHECK(hints, "allocinfo");
	hints->ep_attr->type = FI_EP_MSG;
	hints->mode = ~0ULL;
	hints->fabric_attr->prov_name = strdup("tcp");
	for (k = 0; k < 2; k++) {
		struct fi_bus_attr *bus;
		const char *name;
		unsigned v[4];

		ret = fi_getinfo(FI_VERSION(1, 17), nodes[k], NULL, nodes[k] ? FI_SOURCE : 0,
				 hints, &info);
		CHECK(ret == 0, "fi_getinfo tcp %s: %d", nodes[k] ? nodes[k] : "(default)", ret);
		CHECK(info->nic && info->nic->device_attr && info->nic->bus_attr, "a nic with a bus");
		name = info->nic->device_attr->name;
		bus = info->nic->bus_attr;
		printf("nic %s: bus_type %d", name, (int)bus->bus_type);
		if (bus->bus_type == FI_BUS_PCI)
			printf(" %04x:%02x:%02x.%x", bus->attr.pci.domain_id, bus->attr.pci.bus_id,
			       bus->attr.pci.device_id, bus->attr.pci.function_id);
		printf("\n");
		if (sysfs_pci(name, v)) {
			CHECK(bus->bus_type == FI_BUS_PCI && bus->attr.pci.domain_id == v[0] &&
			      bus->attr.pci.bus_id == v[1] && bus->attr.pci.device_id == v[2] &&
			      bus->attr.pci.function_id == v[3],
			      "%s: sysfs says PCI %04x:%02x:%02x.%x", name, v[0], v[1], v[2], v[3]);
		} else {
			CHECK(bus->bus_type == FI_BUS_UNKNOWN, "%s: no PCI device in sysfs", name);
		}
		if (nodes[k])
			CHECK(!strcmp(name, "lo") && bus->bus_type == FI_BUS_UNKNOWN, "%s", name);
		fi_freeinfo(info);
	}
	fi_freeinfo(hints);
	printf("nic bus ok\n");
}

static void check_tostr(void)
{
	uint64_t caps = FI_MSG | FI_RMA;
	enum fi_ep_type t = FI_EP_DGRAM;
	enum fi_threading th = FI_THREAD_DOMAIN;
	char small[8];

	CHECK(!strcmp(fi_tostr(&caps, FI_TYPE_CAPS), "FI_MSG, FI_RMA"), "%s",
	      fi_tostr(&caps, FI_TYPE_CAPS));
	CHECK(!strcmp(fi_tostr(&t, FI_TYPE_EP_TYPE), "FI_EP_DGRAM"), "ep type");
	CHECK(!strcmp(fi_tostr(&th, FI_TYPE_THREADING), "FI_THREAD_DOMAIN"), "threading");
	CHECK(fi_tostr_r(small, sizeof(small), &t, FI_TYPE_EP_TYPE) == small, "tostr_r");
	CHECK(!strcmp(small, "FI_EP_D"), "cut to fit: %s", small);
	printf("tostr ok\n");
}

static struct fi_provider test_prov = { .name = "capitest" };

static void check_params(void)
{
	struct fi_param *params;
	int count, i, found = 0, ret, ival = 0;
	char *sval = NULL;

	ret = fi_param_define(&test_prov, "depth", FI_PARAM_INT, "Queue depth (max %d)", 64);
	CHECK(ret == 0, "define: %d", ret);
	ret = fi_param_define(&test_prov, "label", FI_PARAM_STRING, "A label");
	CHECK(ret == 0, "define: %d", ret);
	ret = fi_param_get_int(&test_prov, "depth", &ival);
	CHECK(ret == 0 && ival == 42, "get int: %d %d (FI_CAPITEST_DEPTH=42 is set)", ret, ival);
	ret = fi_param_get_str(&test_prov, "label", &sval);
	CHECK(ret == -FI_ENODATA, "unset: %d", ret);
	ret = fi_param_get_int(&test_prov, "undefined", &ival);
	CHECK(ret == -FI_ENOENT, "undefined: %d", ret);

	ret = fi_getparams(&params, &count);
	CHECK(ret == 0 && count > 0, "getparams %d", ret);
	for (i = 0; i < count; i++) {
		if (!strcmp(params[i].name, "FI_CAPITEST_DEPTH")) {
			found = 1;
			CHECK(params[i].type == FI_PARAM_INT, "type");
			CHECK(!strcmp(params[i].help_string, "Queue depth (max 64)"), "%s",
			      params[i].help_string);
			CHECK(params[i].value && !strcmp(params[i].value, "42"), "value");
		}
	}
	CHECK(params[count].name == NULL, "terminated");
	CHECK(found, "FI_CAPITEST_DEPTH listed");
	fi_freeparams(params);
	printf("params ok\n");
}

static void check_log_and_open(void)
{
	struct fid *fid = (struct fid *)0x1;
	int ret;

	/* FI_LOG_LEVEL=warn is set: warnings are on, debug is off. */
	CHECK(fi_log_enabled(&test_prov, FI_LOG_WARN, FI_LOG_CORE), "warn enabled");
	CHECK(!fi_log_enabled(&test_prov, FI_LOG_DEBUG, FI_LOG_CORE), "debug disabled");
	fi_log(&test_prov, FI_LOG_WARN, FI_LOG_CORE, __func__, __LINE__,
	       "capi-test-warning %d\n", 7);
	ret = fi_open(FI_VERSION(1, 17), "mr_cache", NULL, 0, 0, &fid, NULL);
	CHECK(ret == -FI_ENOSYS && fid == NULL, "fi_open: %d", ret);
	printf("log and open ok\n");
}

static void check_compat_symbols(void)
{
	typedef int (*getinfo_fn)(uint32_t, const char *, const char *, uint64_t,
				  const struct fi_info *, struct fi_info **);
	void *lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_NOLOAD);
	getinfo_fn old, cur;
	struct fi_info *info = (struct fi_info *)0x1;

	CHECK(lib, "dlopen: %s", dlerror());
	old = (getinfo_fn)dlvsym(lib, "fi_getinfo", "FABRIC_1.0");
	cur = (getinfo_fn)dlvsym(lib, "fi_getinfo", "FABRIC_1.3");
	CHECK(old && cur && old != cur, "versioned symbols");
	CHECK(cur == (getinfo_fn)fi_getinfo, "the default is FABRIC_1.3");
	CHECK(old(FI_VERSION(1, 0), NULL, NULL, 0, NULL, &info) == -FI_ENOSYS && !info,
	      "compat refuses");
	CHECK(dlvsym(lib, "fi_tostr_r", "FABRIC_1.4") && dlvsym(lib, "fi_log_ready", "FABRIC_1.6"),
	      "versions");
	dlclose(lib);
	printf("compat ok\n");
}

int main(void)
{
	check_strerror();
	check_getinfo();
	check_nic_bus();
	check_tostr();
	check_params();
	check_log_and_open();
	check_compat_symbols();
	printf("all ok\n");
	return 0;
}
