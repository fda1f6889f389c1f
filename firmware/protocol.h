/* The protocol's constants (docs/protocol.md, version 1.0). */
#ifndef SHUFFLER_PROTOCOL_H
#define SHUFFLER_PROTOCOL_H

#define PROTOCOL_MAJOR 1
#define PROTOCOL_MINOR 0
#define SILENCE_MS 500
#define ACK_FIRST_MS 30
#define ACK_MAX_MS 500
#define ACK_TRIES 8
#define MAX_PAYLOAD 250
#define MAX_CARDS 1024
#define CRC16_INIT 0xFFFFu
#define CRC16_POLY 0x1021u

#define MSG_ACK 0x01
#define MSG_HELLO 0x10
#define MSG_HELLO_REPLY 0x11
#define MSG_HEARTBEAT 0x12
#define MSG_PASS 0x20
#define MSG_STOP 0x21
#define MSG_STATUS 0x22
#define MSG_BATTERY 0x23
#define MSG_CLEAR 0x24
#define MSG_SIGNAL 0x25
#define MSG_CARD 0x30
#define MSG_PASS_DONE 0x31
#define MSG_STATUS_REPLY 0x32
#define MSG_BATTERY_REPLY 0x33
#define MSG_INPUT 0x35

#define FAULT_NONE 0
#define FAULT_JAM 1
#define FAULT_MISFEED 2
#define FAULT_LOW_BATTERY 3
#define FAULT_LINK_LOST 4
#define FAULT_TIMEOUT 5
#define FAULT_LATCHED 6
#define FAULT_BAD_REQUEST 7
#define FAULT_STOPPED FAULT_TIMEOUT  /* 1.0 has no code of its own for STOP */

#define INPUT_TOUCH 1
#define INPUT_TRAY_LOADED 2
#define INPUT_TRAY_EMPTY 3
#define INPUT_PILE_LIFTED 4
#define PILE_NONE 0xFF

#define SIGNAL_READY 0
#define SIGNAL_RUNNING 1
#define SIGNAL_STACK 2
#define SIGNAL_LOW_BATTERY 3
#define SIGNAL_FAULT 4
#define SIGNAL_OFF 5

#define CAP_PILE_SENSORS 1
#define CAP_BATTERY 2
#define CAP_REVERSE 4

#endif
