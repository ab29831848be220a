// Scatter-list cursor: places one packet's payload into a scatter list, as pieces that each
// stay within one SGE. The completer uses it for READ responses (the local SGL of the READ
// WQE), the responder for SEND payload (the SGL of the receive WQE).
//
// i_load starts a packet: the cursor at SGE 0, offset 0, with i_seek bytes to skip (the
// packet's offset in the message) and i_len bytes to place. The parents hold i_load in every
// cycle before placing (the cursor is observed only while i_step is held), so the cursor
// starts from what they present in the cycle before their placement state. While i_step is held, each cycle
// either skips one SGE of the seek (or lands inside it), moves past an exhausted SGE, or,
// when the sink takes it (i_ready), emits the piece at the cursor: o_addr, o_take bytes,
// o_last on the packet's last piece. The parent looks up SGE o_sge of its WQE and presents
// it on i_sge in the same cycle. Past SGE 15 the cursor stays on SGE 15 (whose length bounds
// what can still be placed; the message length was checked against the SGL before).
module hm_sgl_cursor
  import hm_desc_pkg::*;
(
  input  logic        clk,
  input  logic        rst,

  // Start a packet (held in every cycle before placing)
  input  logic        i_load,
  input  logic [31:0] i_seek,
  input  logic [12:0] i_len,

  // The SGE at the cursor
  output logic [3:0]  o_sge,
  input  hm_sge_t     i_sge,

  // Placing: move, or emit the piece at the cursor when the sink is ready
  input  logic        i_step,
  input  logic        i_ready,
  output logic [63:0] o_addr,
  output logic [12:0] o_take,
  output logic        o_valid,   // a piece is offered (seek done, SGE not exhausted)
  output logic        o_last     // it is the packet's last
);
  // The bytes left in the SGE at the cursor: its length while the cursor is at its start
  // (at_start_q; the parent presents the SGE in the cycle it is used), else avail_q, kept
  // beside the offset so that no subtraction lies between the registers and the piece's
  // length (the cursor stays on one WQE from i_load to the packet's end).
  logic [3:0]  sj_q;
  logic [31:0] soff_q, seek_q, avail_q;
  logic        at_start_q;
  logic [12:0] prem_q;
  logic [31:0] avail;
  logic        fits;        // avail <= prem_q: the piece takes the rest of the SGE
  assign avail   = at_start_q ? i_sge.len : avail_q;
  assign fits    = avail[31:13] == '0 && avail[12:0] <= prem_q;
  assign o_sge   = sj_q;
  assign o_take  = fits ? avail[12:0] : prem_q;
  assign o_addr  = i_sge.addr + 64'(soff_q);
  assign o_valid = avail != '0 && seek_q == '0;
  assign o_last  = avail[31:13] != '0 || avail[12:0] >= prem_q;   // o_take == prem_q

  always_ff @(posedge clk) begin
    if (rst) begin
      // (nothing to clear: i_load sets every register before a packet is placed)
    end else if (i_load) begin
      sj_q       <= '0;
      soff_q     <= '0;
      at_start_q <= 1'b1;
      seek_q     <= i_seek;
      prem_q     <= i_len;
    end else if (i_step) begin
      if (seek_q != '0) begin
        // move the cursor to the packet's offset in the SGL
        if (seek_q >= i_sge.len && sj_q != 4'd15) begin
          seek_q <= seek_q - i_sge.len;
          sj_q   <= sj_q + 1'b1;
        end else begin
          soff_q     <= seek_q;
          avail_q    <= i_sge.len - seek_q;
          at_start_q <= 1'b0;
          seek_q     <= '0;
        end
      end else if (avail == '0) begin
        if (sj_q != 4'd15) sj_q <= sj_q + 1'b1;
        soff_q     <= '0;
        at_start_q <= 1'b1;
      end else if (i_ready) begin
        prem_q <= prem_q - o_take;
        if (fits) begin
          sj_q       <= sj_q + 1'b1;
          soff_q     <= '0;
          at_start_q <= 1'b1;
        end else begin
          soff_q     <= soff_q + 32'(o_take);
          avail_q    <= avail - 32'(o_take);
          at_start_q <= 1'b0;
        end
      end
    end
  end

  logic unused_ok;
  assign unused_ok = ^i_sge.lkey;   // the parent checked the keys
endmodule
