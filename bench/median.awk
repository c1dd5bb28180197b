# median.awk: prints the median of the numbers on stdin, one per line
# (mean of the middle two for an even count); prints "nan" for no input.
# Usage: some-command | awk -f bench/median.awk
# Plain POSIX awk (mawk, gawk, busybox) - no asort - so it runs anywhere.
/^[ \t]*[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?[ \t]*$/ {
  v[n++] = $1 + 0
}
END {
  if (n == 0) { print "nan"; exit 0 }
  # Insertion sort: n is the number of benchmark rounds, a handful.
  for (i = 1; i < n; i++) {
    x = v[i]
    for (j = i - 1; j >= 0 && v[j] > x; j--) v[j + 1] = v[j]
    v[j + 1] = x
  }
  m = (n % 2) ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2
  printf "%.1f\n", m
}
