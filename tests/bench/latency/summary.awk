# tests/bench/latency/summary.awk: reads latency.sh's round lines (key=value fields) and prints
# the median over the rounds of each system's p50 and p99, and in how many rounds rowlock's p50
# was at or below the peer's, and the median and mean of rowlock's p50 less the peer's over
# the rounds (each round the two ran one after the other).
function median(a, s, k,   i, j, t, x) {
    for (i = 1; i <= k; i++)
        x[i] = a[s, i] + 0
    for (i = 1; i <= k; i++)
        for (j = i + 1; j <= k; j++)
            if (x[j] < x[i]) {
                t = x[i]; x[i] = x[j]; x[j] = t
            }
    return k % 2 ? x[(k + 1) / 2] : (x[k / 2] + x[k / 2 + 1]) / 2
}
{
    delete v
    for (i = 1; i <= NF; i++) {
        split($i, kv, "=")
        v[kv[1]] = kv[2]
    }
    s = v["system"]
    n[s]++
    p50[s, n[s]] = v["p50_ms"]
    p99[s, n[s]] = v["p99_ms"]
    round_p50[v["round"], s] = v["p50_ms"]
    if (s != "rowlock")
        peer = s
}
END {
    for (s in n)
        printf "summary system=%s rounds=%d median_p50_ms=%.2f median_p99_ms=%.2f\n", s, n[s],
            median(p50, s, n[s]), median(p99, s, n[s])
    if (peer != "" && n["rowlock"] > 0) {
        w = 0
        sum = 0
        for (r = 1; r <= n["rowlock"]; r++) {
            d = round_p50[r, "rowlock"] - round_p50[r, peer]
            diff["d", r] = d
            sum += d
            if (d <= 0)
                w++
        }
        printf "summary rounds_rowlock_p50_at_or_below_%s=%d/%d\n", peer, w, n["rowlock"]
        # the same round, the machine in the same state: rowlock's p50 less the peer's
        printf "summary p50_difference_ms median=%.3f mean=%.3f\n", median(diff, "d", n["rowlock"]),
            sum / n["rowlock"]
    }
}
