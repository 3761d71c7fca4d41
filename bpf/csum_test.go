// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// TestChecksumCompleteDetects shows what the checksum tests rely on: on a
// CHECKSUM_COMPLETE packet, an IPv6 address rewrite whose checksum update
// lacks BPF_F_IPV6 leaves skb->csum wrong, and the kernel's test run says
// so (EBADMSG); with the flag, or with the program's compensation, it is
// right.
func TestChecksumCompleteDetects(t *testing.T) {
	requireRoot(t)
	supported, err := CsumIPv6Supported()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		flags      int32
		compensate bool
		wantBad    bool
	}{
		{"pseudo-header update without BPF_F_IPV6", csumPseudoHdr, false, true},
		{"compensated as the program does", csumPseudoHdr, true, false},
		{"with BPF_F_IPV6", csumPseudoHdr | csumIPv6, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.flags&csumIPv6 != 0 && !supported {
				t.Skip("this kernel refuses BPF_F_IPV6")
			}
			prog := addressRewrite(t, tc.flags, tc.compensate)
			in := packet(protoTCP, client, vip, 40000, 80, []byte("payload"))
			_, err := prog.Run(&ebpf.RunOptions{Data: in, DataOut: make([]byte, len(in)+64), Flags: testChecksumComplete})
			if tc.wantBad && !isBadMsg(err) {
				t.Fatalf("run: %v, want EBADMSG (skb->csum left wrong)", err)
			}
			if !tc.wantBad && err != nil {
				t.Fatalf("run: %v", err)
			}
		})
	}
}

// addressRewrite is a program that changes the first word of the IPv6
// source address and updates the TCP checksum for it, by the difference
// as a pseudo-header change (as vip.c does) with the given flags, then,
// if compensate, adds the difference back to skb->csum as vip.c does on
// kernels without BPF_F_IPV6.
func addressRewrite(t *testing.T, flags int32, compensate bool) *ebpf.Program {
	t.Helper()
	const newWord = 0x01020304
	old := int32(words(client).W[0]) // 2001:0db8, as the program reads it
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.StoreImm(asm.R10, -4, newWord, asm.Word),
		asm.StoreImm(asm.R10, -8, int64(old), asm.Word),
		// r7 = bpf_csum_diff(&old, 4, &new, 4, 0)
		asm.Mov.Reg(asm.R1, asm.R10),
		asm.Add.Imm(asm.R1, -8),
		asm.Mov.Imm(asm.R2, 4),
		asm.Mov.Reg(asm.R3, asm.R10),
		asm.Add.Imm(asm.R3, -4),
		asm.Mov.Imm(asm.R4, 4),
		asm.Mov.Imm(asm.R5, 0),
		asm.FnCsumDiff.Call(),
		asm.Mov.Reg(asm.R7, asm.R0),
		// bpf_skb_store_bytes(skb, source address, &new, 4, 0)
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, 14+8),
		asm.Mov.Reg(asm.R3, asm.R10),
		asm.Add.Imm(asm.R3, -4),
		asm.Mov.Imm(asm.R4, 4),
		asm.Mov.Imm(asm.R5, 0),
		asm.FnSkbStoreBytes.Call(),
		// bpf_l4_csum_replace(skb, TCP checksum, 0, diff, flags)
		asm.Mov.Reg(asm.R1, asm.R6),
		asm.Mov.Imm(asm.R2, 14+40+16),
		asm.Mov.Imm(asm.R3, 0),
		asm.Mov.Reg(asm.R4, asm.R7),
		asm.Mov.Imm(asm.R5, flags),
		asm.FnL4CsumReplace.Call(),
	}
	if compensate {
		insns = append(insns,
			asm.Mov.Reg(asm.R1, asm.R6),
			asm.Mov.Reg(asm.R2, asm.R7),
			asm.FnCsumUpdate.Call(),
		)
	}
	insns = append(insns, asm.Mov.Imm(asm.R0, 0), asm.Return())
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, Instructions: insns, License: "Apache-2.0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	return prog
}
