package worker

import "hash/fnv"

// Shard returns the forms that belong to shard index of count. The split
// hashes each form id (FNV-1a), so it is stable across runs and pods and
// independent of the order the forms are listed in: every form lands in
// exactly one shard.
func Shard(forms []string, index, count int) []string {
	if count <= 1 {
		return forms
	}
	var out []string
	for _, f := range forms {
		h := fnv.New32a()
		h.Write([]byte(f))
		if int(h.Sum32()%uint32(count)) == index {
			out = append(out, f)
		}
	}
	return out
}
