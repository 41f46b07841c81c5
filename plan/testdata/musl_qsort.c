/* Generator of musl_qsort.txt: musl-gcc -O2 -static -o gold musl_qsort.c && ./gold > musl_qsort.txt (musl 1.2.3, Debian musl-tools). */
/* Prints permutations made by this libc's qsort for arrays with many ties. */
#include <stdio.h>
#include <stdlib.h>
struct e { int id; double v; };
static int cmp(const void *a, const void *b) {
	const struct e *x = *(struct e *const *)a, *y = *(struct e *const *)b;
	double d = x->v - y->v;
	return d < 0 ? -1 : d > 0 ? 1 : 0;
}
int main(void) {
	static const double vals[] = {0, 0.5625, 0.75, 1, 1.3125, 1.5, 2, 2.75, 3};
	srand(7);
	printf("# musl qsort permutations: loads -> ids in sorted order\n");
	for (int t = 0; t < 600; t++) {
		int n = 1 + (t < 400 ? t % 12 : rand() % 80);
		int k = 1 + rand() % 4; /* distinct values used */
		struct e el[128]; struct e *p[128];
		for (int i = 0; i < n; i++) { el[i].id = i; el[i].v = vals[rand() % k + (k > 1 ? rand() % 3 : 0)]; p[i] = &el[i]; }
		if (t % 5 == 0) for (int i = 0; i < n; i++) el[i].v = 0;
		for (int i = 0; i < n; i++) printf("%s%g", i ? " " : "", el[i].v);
		qsort(p, n, sizeof p[0], cmp);
		printf(" ->");
		for (int i = 0; i < n; i++) printf(" %d", p[i]->id);
		printf("\n");
	}
	return 0;
}
