// Doorbell queue of a block whose control commands must follow the doorbells rung before
// them. Doorbells wait in a FIFO, so the block that rings them never waits. A control command
// that the owner sees while idle (i_idle && i_ctl_valid) arms the queue and counts the
// doorbells queued at that moment: o_drain is set while any of those remains, and the owner
// takes them (m_db first in line) before the command; taking the command (i_ctl_take)
// disarms. A doorbell rung before the control plane reloaded a QP belongs to the old ring and
// must act on the old state, never on the reloaded one (it would believe the old producer
// index). Used by the responder (receive queues) and the completer (send queues).
module hm_db_order
  import hm_regs_pkg::*;
#(
  // Doorbells queued (a power of two).
  parameter int DEPTH = 16
) (
  input  logic      clk,
  input  logic      rst,

  // Doorbells in
  input  hm_db_qp_t s_db,
  input  logic      s_db_valid,
  output logic      s_db_ready,

  // The doorbell first in line
  output hm_db_qp_t m_db,
  output logic      m_db_valid,
  input  logic      m_db_ready,

  // Control commands: the owner is idle, a command waits, the owner takes it
  input  logic      i_idle,
  input  logic      i_ctl_valid,
  input  logic      i_ctl_take,
  output logic      o_armed,     // the command may be taken once o_drain is clear
  output logic      o_drain      // doorbells queued before the command remain
);
  logic [$clog2(DEPTH+1):0] level, wait_q;

  hm_fifo #(.WIDTH($bits(hm_db_qp_t)), .DEPTH(DEPTH)) u_fifo (
    .clk, .rst, .s_data(s_db), .s_valid(s_db_valid), .s_ready(s_db_ready),
    .m_data(m_db), .m_valid(m_db_valid), .m_ready(m_db_ready), .level);

  assign o_drain = o_armed && wait_q != '0;

  always_ff @(posedge clk) begin
    if (rst) begin
      o_armed <= 1'b0;
      wait_q  <= '0;
    end else begin
      if (i_idle && i_ctl_valid && !o_armed) begin
        o_armed <= 1'b1;
        wait_q  <= level;
      end
      if (m_db_valid && m_db_ready && o_drain) wait_q <= wait_q - 1'b1;
      if (i_ctl_take) o_armed <= 1'b0;
    end
  end
endmodule
